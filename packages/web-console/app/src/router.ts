/**
 * Routes of the console under the path it is mounted at (the page's <base href>): history
 * navigation, links that stay in the app, and a hook that re-renders on every move.
 */
import { useEffect, useState } from 'preact/hooks';

const base = new URL(document.baseURI).pathname.replace(/\/?$/, '/');

/** The app's path, without the mount path: '/', '/conversations/abc', … */
function currentPath(): string {
  const path = location.pathname.startsWith(base) ? location.pathname.slice(base.length - 1) : location.pathname;
  return path === '' ? '/' : path;
}

/** Where an app path is in the browser. */
export const href = (path: string) => `${base}${path.replace(/^\//, '')}`;

export function navigate(path: string, options: { replace?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, '', href(path));
  else history.pushState(null, '', href(path));
  dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute(): { path: string; query: URLSearchParams } {
  const [state, setState] = useState(() => ({ path: currentPath(), query: new URLSearchParams(location.search) }));
  useEffect(() => {
    const onMove = () => setState({ path: currentPath(), query: new URLSearchParams(location.search) });
    addEventListener('popstate', onMove);
    return () => removeEventListener('popstate', onMove);
  }, []);
  return state;
}

/** A click on an in-app link moves without a page load (modified clicks open tabs as usual). */
export function onLinkClick(event: MouseEvent): void {
  const anchor = (event.target as Element | null)?.closest('a');
  if (
    !anchor ||
    event.defaultPrevented ||
    event.button !== 0 ||
    event.metaKey ||
    event.ctrlKey ||
    event.shiftKey ||
    event.altKey
  )
    return;
  if (
    anchor.target ||
    anchor.hasAttribute('download') ||
    anchor.origin !== location.origin ||
    !anchor.pathname.startsWith(base)
  )
    return;
  if (anchor.dataset.external !== undefined) return;
  event.preventDefault();
  navigate(`${anchor.pathname.slice(base.length - 1)}${anchor.search}`);
}
