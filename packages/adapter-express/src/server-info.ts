import { readFile, statfs } from 'node:fs/promises';
import { totalmem } from 'node:os';

/**
 * What `GET /server_info` reports about this process and its host, in OpenHands 1.11's shape:
 * uptime, time since the last request, and CPU, memory, disk and I/O figures. Where the platform
 * cannot tell (no /proc outside Linux), a figure is 0.
 */
export interface ServerInfo {
  uptime: number;
  idle_time: number;
  resources: {
    cpu_percent: number;
    memory: { rss: number; vms: number; percent: number };
    disk: { total: number; used: number; free: number; percent: number };
    io: { read_bytes: number; write_bytes: number };
  };
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** A `Key: value` line of a /proc file, as a number (0 when absent or unreadable). */
async function procFigure(file: string, key: string): Promise<number> {
  try {
    const text = await readFile(file, 'utf8');
    const match = new RegExp(`^${key}:\\s*(\\d+)`, 'm').exec(text);
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

async function diskOf(path: string): Promise<ServerInfo['resources']['disk']> {
  try {
    const s = await statfs(path);
    const total = s.blocks * s.bsize;
    const free = s.bavail * s.bsize;
    const used = (s.blocks - s.bfree) * s.bsize;
    return { total, used, free, percent: used + free > 0 ? round1((used / (used + free)) * 100) : 0 };
  } catch {
    return { total: 0, used: 0, free: 0, percent: 0 };
  }
}

/**
 * A reporter that keeps where it last sampled the CPU: `cpu_percent` is this process's CPU time
 * over the wall time since the previous report (since the process started, the first time),
 * so a report takes no sampling pause.
 */
export function serverInfoReporter(lastRequestAt: () => number) {
  let last = { wallMs: performance.timeOrigin, cpuMicros: 0 };
  return async (): Promise<ServerInfo> => {
    const now = Date.now();
    const cpu = process.cpuUsage();
    const cpuMicros = cpu.user + cpu.system;
    const wallMs = now - last.wallMs;
    const cpuPercent = wallMs > 0 ? round1(((cpuMicros - last.cpuMicros) / 1000 / wallMs) * 100) : 0;
    last = { wallMs: now, cpuMicros };
    const rss = process.memoryUsage().rss;
    const [vmsKb, readBytes, writeBytes, disk] = await Promise.all([
      procFigure('/proc/self/status', 'VmSize'),
      procFigure('/proc/self/io', 'read_bytes'),
      procFigure('/proc/self/io', 'write_bytes'),
      diskOf('/'),
    ]);
    return {
      uptime: process.uptime(),
      idle_time: Math.max(0, (now - lastRequestAt()) / 1000),
      resources: {
        cpu_percent: Math.max(0, cpuPercent),
        memory: { rss, vms: vmsKb * 1024, percent: (rss / totalmem()) * 100 },
        disk,
        io: { read_bytes: readBytes, write_bytes: writeBytes },
      },
    };
  };
}
