/** Who is signed in: read once from GET /api/auth/session, refreshed after sign-in and sign-out. */
import { createContext, type ReactNode, useCallback, useContext, useEffect, useState } from 'react';
import { api, call } from './api/client.ts';

/** `notice`: a one-time notice to show until dismissed (./account-notice.tsx) */
export type User = {
  id: string;
  name: string;
  email: string;
  isAdmin: boolean;
  notice?: { kind: 'password-cleared'; provider: 'idp' | 'codehost'; message: string } | undefined;
};
type SessionState = { user: User | null; loading: boolean; refresh(): Promise<User | null>; signOut(): Promise<void> };

const Ctx = createContext<SessionState | null>(null);

export function SessionProvider({ children }: { children: ReactNode }) {
  const [user, setUser] = useState<User | null>(null);
  const [loading, setLoading] = useState(true);
  const refresh = useCallback(async () => {
    try {
      const res = await call(api.GET('/api/auth/session'));
      setUser(res.user);
      return res.user;
    } catch {
      setUser(null);
      return null;
    } finally {
      setLoading(false);
    }
  }, []);
  const signOut = useCallback(async () => {
    await call(api.POST('/api/auth/signout')).catch(() => undefined);
    setUser(null);
  }, []);
  useEffect(() => {
    void refresh();
    // any 401 from the API means the cookie is gone or expired: show the sign-in page
    const ended = () => setUser(null);
    window.addEventListener('session-ended', ended);
    return () => window.removeEventListener('session-ended', ended);
  }, [refresh]);
  return <Ctx.Provider value={{ user, loading, refresh, signOut }}>{children}</Ctx.Provider>;
}

export function useSession(): SessionState {
  const s = useContext(Ctx);
  if (!s) throw new Error('useSession outside SessionProvider');
  return s;
}
