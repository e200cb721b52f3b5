/** The shell: which page a path shows, the navigation, and the sign-in gate for /dashboard/*. */
import { type ReactNode, useEffect, useState } from 'react';
import { AccountNotice } from './account-notice.tsx';
import { type Features, useFeatures } from './features.ts';
import { AdminPage } from './pages/admin.tsx';
import { AgentPage } from './pages/agent/page.tsx';
import { AgentsPage } from './pages/agents.tsx';
import { CalendarPage } from './pages/calendar.tsx';
import { ConfigPage } from './pages/config.tsx';
import { KeysPage } from './pages/keys.tsx';
import { LoginPage } from './pages/login.tsx';
import { ResetPasswordPage } from './pages/reset-password.tsx';
import { SettingsPage } from './pages/settings.tsx';
import { SetupPage } from './pages/setup.tsx';
import { UsagePage } from './pages/usage.tsx';
import { WalletPage } from './pages/wallet.tsx';
import { WorkflowsPage } from './pages/workflows.tsx';
import { navigate, useLocation } from './router.ts';
import { useSession } from './session.tsx';
import { Link, Spinner } from './ui.tsx';

/**
 * `feature`: shown only when the server offers it (GET /api/features), so the menu never leads to a
 * page that can only say "not configured"; a direct visit still shows that page and its explanation.
 */
const NAV: { href: string; label: string; admin?: boolean; feature?: keyof Features }[] = [
  { href: '/dashboard', label: 'Agents' },
  { href: '/dashboard/keys', label: 'API keys' },
  { href: '/dashboard/workflows', label: 'Workflows' },
  { href: '/dashboard/config', label: 'Configuration' },
  { href: '/dashboard/wallet', label: 'Wallet' },
  { href: '/dashboard/usage', label: 'Usage' },
  { href: '/dashboard/calendar', label: 'Calendar', feature: 'calendar' },
  { href: '/dashboard/settings', label: 'Settings' },
  { href: '/dashboard/admin', label: 'Admin', admin: true },
];

/** `heading: false`: the page writes its own <h1> (the agent page names the agent). */
function page(path: string): { title: string; body: ReactNode; heading?: false } {
  const agent = /^\/dashboard\/agents\/([^/]+)$/.exec(path);
  if (agent) return { title: 'Agent', heading: false, body: <AgentPage id={decodeURIComponent(agent[1]!)} /> };
  switch (path) {
    case '/dashboard':
      return { title: 'Agents', body: <AgentsPage /> };
    case '/dashboard/keys':
      return { title: 'API keys', body: <KeysPage /> };
    case '/dashboard/workflows':
      return { title: 'Workflows', body: <WorkflowsPage /> };
    case '/dashboard/config':
      return { title: 'Configuration', body: <ConfigPage /> };
    case '/dashboard/wallet':
      return { title: 'Wallet', body: <WalletPage /> };
    case '/dashboard/usage':
      return { title: 'Usage', body: <UsagePage /> };
    case '/dashboard/calendar':
      return { title: 'Calendar', body: <CalendarPage /> };
    case '/dashboard/settings':
      return { title: 'Settings', body: <SettingsPage /> };
    case '/dashboard/admin':
      return { title: 'Admin', body: <AdminPage /> };
    case '/dashboard/setup':
      return { title: 'Admin setup', body: <SetupPage /> };
    default:
      return {
        title: 'Not found',
        body: (
          <p>
            There is no page at this address. <Link href="/dashboard">Back to your agents</Link>
          </p>
        ),
      };
  }
}

export function App() {
  const { path } = useLocation();
  const { user, loading, signOut } = useSession();
  const [menuOpen, setMenuOpen] = useState(false);
  const features = useFeatures();
  const isDashboard = path === '/dashboard' || path.startsWith('/dashboard/');

  useEffect(() => {
    if (loading) return;
    if (path === '/') navigate(user ? '/dashboard' : '/login', { replace: true });
    else if (isDashboard && !user) navigate(`/login?next=${encodeURIComponent(location.pathname + location.search)}`, { replace: true });
  }, [path, user, loading, isDashboard]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: the menu closes whenever the page changes
  useEffect(() => {
    setMenuOpen(false);
  }, [path]);
  const current = user && isDashboard ? page(path) : null;
  useTitle(path === '/login' ? 'Sign in' : path === '/reset-password' ? 'Reset your password' : (current?.title ?? 'Loading'));

  if (loading) return <Spinner />;
  if (path === '/login') return <LoginPage />;
  if (path === '/reset-password') return <ResetPasswordPage />;
  if (!user || !current) return <Spinner />;

  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link href="/dashboard" className="brand">
          Agent platform
        </Link>
        <button
          type="button"
          className="btn btn-secondary menu-toggle"
          aria-expanded={menuOpen}
          aria-controls="nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
        <div className="who">
          <span className="who-name">{user.name || user.email}</span>
          <button
            type="button"
            className="btn btn-secondary"
            onClick={async () => {
              await signOut();
              navigate('/login', { replace: true });
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <nav id="nav" className={menuOpen ? 'nav open' : 'nav'} aria-label="Main">
        <ul>
          {NAV.filter((n) => (!n.admin || user.isAdmin) && (!n.feature || features?.[n.feature])).map((n) => (
            <li key={n.href}>
              <Link
                href={n.href}
                current={n.href === '/dashboard' ? path === '/dashboard' || path.startsWith('/dashboard/agents') : path === n.href}
              >
                {n.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        <AccountNotice />
        {current.heading !== false && <h1>{current.title}</h1>}
        {current.body}
      </main>
    </div>
  );
}

function useTitle(title: string) {
  useEffect(() => {
    document.title = `${title} · Agent platform`;
  }, [title]);
}
