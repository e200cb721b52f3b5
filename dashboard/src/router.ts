/**
 * A tiny history router: the dashboard has a dozen flat pages, so the path is matched by hand in
 * app.tsx and links are ordinary <a href> elements that `navigate` intercepts (they still work
 * with a middle click, and without JavaScript they are real addresses the server answers).
 */
import { useEffect, useState } from 'react';

export function navigate(to: string, options: { replace?: boolean } = {}) {
  if (options.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.dispatchEvent(new Event('popstate'));
  window.scrollTo(0, 0);
}

export function useLocation(): { path: string; query: URLSearchParams } {
  const read = () => ({ path: location.pathname.replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) });
  const [loc, setLoc] = useState(read);
  // biome-ignore lint/correctness/useExhaustiveDependencies: `read` only reads window.location; subscribe once
  useEffect(() => {
    const on = () => setLoc(read());
    window.addEventListener('popstate', on);
    return () => window.removeEventListener('popstate', on);
  }, []);
  return loc;
}

/** Click handler for same-origin links: client-side navigation unless a modifier key asks for a new tab. */
export function onLinkClick(event: React.MouseEvent<HTMLAnchorElement>) {
  const a = event.currentTarget;
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  if (a.target || a.origin !== location.origin) return;
  event.preventDefault();
  navigate(a.pathname + a.search);
}
