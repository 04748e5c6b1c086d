/** Small pieces every page uses: loading, empty and error states, badges, times, money. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export function Loading({ what }: { what: string }) {
  return (
    <p class="state loading" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="state empty">{children}</div>;
}

/** What went wrong, in the server's words (a 4xx shows its message and the fields it names). */
export function ErrorBox({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const api = error instanceof ApiError ? error : null;
  return (
    <div class="state error" role="alert">
      <strong>{api ? (api.status === 0 ? 'No answer' : `${api.status} ${api.code}`) : 'Error'}</strong>
      <span> {error instanceof Error ? error.message : String(error)}</span>
      {api && api.issues.length > 0 && (
        <ul>
          {api.issues.map((issue) => (
            <li key={issue.path}>
              <code>{issue.path || '(body)'}</code>: {issue.message}
            </li>
          ))}
        </ul>
      )}
      {onRetry && (
        <button type="button" class="secondary" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

const STATUS_TONES: Record<string, string> = {
  RUNNING: 'ok',
  STARTING: 'busy',
  PAUSED: 'muted',
  STOPPED: 'muted',
  ERROR: 'bad',
  MISSING: 'bad',
  running: 'busy',
  finished: 'ok',
  idle: 'muted',
  paused: 'muted',
  waiting_for_confirmation: 'warn',
  error: 'bad',
  stuck: 'bad',
  low: 'ok',
  medium: 'warn',
  high: 'bad',
  unknown: 'muted',
};

export function Badge({ value, label }: { value: string | null | undefined; label?: string }) {
  if (!value) return null;
  return (
    <span class={`badge ${STATUS_TONES[value] ?? 'muted'}`} title={label}>
      {label ? `${label}: ` : ''}
      {value.replaceAll('_', ' ')}
    </span>
  );
}

export function formatAge(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

export const formatCost = (usd: number | null | undefined) =>
  usd === null || usd === undefined ? '—' : `$${usd < 0.01 && usd > 0 ? usd.toFixed(4) : usd.toFixed(2)}`;

export const formatDuration = (ms: number) =>
  ms < 1000
    ? `${ms} ms`
    : ms < 60_000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;

/** Loads data for a page: the value, the error, and a reload; stale answers of earlier loads are dropped. */
export function useLoad<T>(
  load: () => Promise<T>,
  deps: unknown[],
): { value: T | undefined; error: unknown; loading: boolean; reload: () => void } {
  const [state, setState] = useState<{ value: T | undefined; error: unknown; loading: boolean }>({
    value: undefined,
    error: undefined,
    loading: true,
  });
  const generation = useRef(0);
  const reload = useCallback(() => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (value) => mine === generation.current && setState({ value, error: undefined, loading: false }),
      (error: unknown) => mine === generation.current && setState((s) => ({ value: s.value, error, loading: false })),
    );
  }, deps);
  useEffect(reload, [reload]);
  return { ...state, reload };
}

/** Runs an action from a button: busy while it runs, its error shown until the next try. */
export function useAction<A extends unknown[]>(
  action: (...args: A) => Promise<unknown>,
): { run: (...args: A) => Promise<void>; busy: boolean; error: unknown } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      await action(...args);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error };
}
