/**
 * The first-admin setup link (docs/admin.md): the server prints `/dashboard/setup?token=…` while
 * no account is an admin. Opening it signed out goes through the sign-in page and back here; this
 * page then spends the token once (GET /api/admin/setup) and says what happened, with the way on.
 */
import { useEffect, useState } from 'react';
import { ApiError, api, call, messageOf } from '../api/client.ts';
import { useLocation } from '../router.ts';
import { useSession } from '../session.tsx';
import { Link, Notice, Section, Spinner } from '../ui.tsx';

type Outcome = { kind: 'admin' } | { kind: 'invalid' } | { kind: 'failed'; message: string };

/** One claim per token and page load, even when an effect runs twice (React's strict mode). */
const claims = new Map<string, Promise<Outcome>>();
const claim = (token: string) => {
  let p = claims.get(token);
  if (!p) {
    p = call(api.GET('/api/admin/setup', { params: { query: { token } } })).then(
      (): Outcome => ({ kind: 'admin' }),
      (err: unknown): Outcome =>
        err instanceof ApiError && err.code === 'SETUP_LINK_INVALID' ? { kind: 'invalid' } : { kind: 'failed', message: messageOf(err) },
    );
    claims.set(token, p);
  }
  return p;
};

export function SetupPage() {
  const { query } = useLocation();
  const { user, refresh } = useSession();
  const token = query.get('token');
  const [outcome, setOutcome] = useState<Outcome>();
  useEffect(() => {
    if (!token) return;
    let live = true;
    void claim(token).then(async (o) => {
      // the admin right shows at once (the Admin page in the navigation)
      if (o.kind === 'admin') await refresh();
      if (live) setOutcome(o);
    });
    return () => {
      live = false;
    };
  }, [token, refresh]);

  if (!token)
    return (
      <Section title="Become the admin">
        <p>
          Open the one-time setup link the server printed when it started (it ends in <code>?token=…</code>).
        </p>
        <Link href="/dashboard">Go to your agents</Link>
      </Section>
    );
  if (!outcome) return <Spinner label="Checking the setup link…" />;
  if (outcome.kind === 'admin')
    return (
      <Section title="You are the admin">
        <Notice kind="success">{user?.email ?? 'Your account'} is now this platform's admin.</Notice>
        <p>
          On the Admin page you see the server's health and every account, and you change plans and admin rights. The setup link is used up;
          no one else can become admin with it.
        </p>
        <p className="row">
          <Link href="/dashboard/admin" className="btn btn-primary">
            Open the Admin page
          </Link>
          <Link href="/dashboard" className="btn btn-secondary">
            Go to your agents
          </Link>
        </p>
      </Section>
    );
  return (
    <Section title="This setup link does not work">
      {outcome.kind === 'invalid' ? (
        user?.isAdmin ? (
          <Notice kind="info">You are already an admin; this link has been used.</Notice>
        ) : (
          <Notice kind="warning">
            This setup link is invalid, expired or already used. While the platform has no admin, each start of the server prints a new one;
            on the server, <code>npm run admin -- {user?.email ?? '<your email>'}</code> also makes an account the admin.
          </Notice>
        )
      ) : (
        <Notice kind="warning">The link could not be checked: {outcome.message}</Notice>
      )}
      <Link href="/dashboard">Go to your agents</Link>
    </Section>
  );
}
