/** One Docker engine of several. */
export interface DockerEngineHost {
  /** Kept in each sandbox's record as where it runs: keep it stable. Default: the URL. */
  name: string;
  /** `unix:///var/run/docker.sock`, or `tcp://host:2376` (TLS with `tlsDir`). */
  url: string;
  /** A directory holding `ca.pem`, `cert.pem` and `key.pem` (as DOCKER_CERT_PATH): the engine is reached over TLS with them. */
  tlsDir?: string;
  /** Most sandboxes this engine runs at once (of every installation). */
  maxRunning: number;
}

/**
 * Reads `ACS_DOCKER_HOSTS`: engines separated by commas, each a URL with optional parameters
 * `name`, `max` (running sandboxes, default `defaultMax`) and `tls` (a certificate directory):
 *
 *   unix:///var/run/docker.sock?name=local&max=10,tcp://10.0.0.5:2376?tls=/etc/acs/engine-b&max=40
 *
 * Throws an Error naming the entry that is wrong.
 */
export function parseDockerHosts(value: string, defaultMax = 20): DockerEngineHost[] {
  const hosts = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry): DockerEngineHost => {
      const [url = '', query = ''] = entry.split('?', 2);
      const params = new URLSearchParams(query);
      if (!/^unix:\/\/\/.+/.test(url) && !/^tcp:\/\/[^/:]+:\d+$/.test(url)) {
        throw new Error(
          `ACS_DOCKER_HOSTS: "${entry}" is not unix:///path/to.sock or tcp://host:port (with ?tls=<dir> for TLS)`,
        );
      }
      for (const key of params.keys())
        if (!['name', 'max', 'tls'].includes(key))
          throw new Error(`ACS_DOCKER_HOSTS: "${entry}" has an unknown parameter "${key}" (name, max, tls)`);
      const max = params.get('max');
      const maxRunning = max === null ? defaultMax : Number(max);
      if (!Number.isInteger(maxRunning) || maxRunning < 0 || maxRunning > 100_000)
        throw new Error(`ACS_DOCKER_HOSTS: "${entry}": max must be a whole number of sandboxes`);
      const tls = params.get('tls');
      if (tls !== null && !url.startsWith('tcp://'))
        throw new Error(`ACS_DOCKER_HOSTS: "${entry}": tls is for tcp:// engines`);
      return { name: params.get('name') ?? url, url, maxRunning, ...(tls ? { tlsDir: tls } : {}) };
    });
  if (hosts.length === 0) throw new Error('ACS_DOCKER_HOSTS lists no engine');
  const names = hosts.map((h) => h.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined)
    throw new Error(
      `ACS_DOCKER_HOSTS: two engines are named "${twice}"; names must be unique (they are kept in sandbox records)`,
    );
  return hosts;
}
