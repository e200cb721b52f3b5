/**
 * Sign in and sign up with email and password (§4.1), or with the identity provider or the code
 * host when the server offers them (GET /api/features). `/login?error=<code>` (the identity-provider
 * and code-host callbacks' redirects) is shown as a sentence; `?next=` returns to the page that asked for a session.
 */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { ApiError, api, call } from '../api/client.ts';
import { EmailField, emailError, NEW_PASSWORD_HINT, PasswordField, passwordError } from '../credential-fields.tsx';
import { useFeatures } from '../features.ts';
import { navigate, useLocation } from '../router.ts';
import { useSession } from '../session.tsx';
import { Button, ErrorText, Field, Link, Notice, useAction } from '../ui.tsx';
import { browserWallet, signInWithWallet } from '../wallet-sign-in.ts';

export const LOGIN_ERRORS: Record<string, string> = {
  AccessDenied: 'Sign-in was cancelled at the provider, or this account may not sign in with it right now.',
  IdpAuthFailed: 'The provider could not sign you in. Please try again from this page.',
  IdpNotConfigured: 'That sign-in method is not set up on this server. Use your email and password.',
  IdpTokenFailed: 'The provider did not confirm your sign-in. Please try again.',
  IdpNoEmail: 'The provider did not share a verified email address, which this platform needs.',
  IdpAuthError: 'Something went wrong while signing in with the provider. Please try again.',
};

export function validateCredentials(mode: 'signin' | 'signup', email: string, password: string): { email?: string; password?: string } {
  const errors: { email?: string; password?: string } = {};
  const emailProblem = emailError(email);
  const passwordProblem = passwordError(password, mode === 'signup');
  if (emailProblem) errors.email = emailProblem;
  if (passwordProblem) errors.password = passwordProblem;
  return errors;
}

export function LoginPage() {
  const { query } = useLocation();
  const { refresh } = useSession();
  const [mode, setMode] = useState<'signin' | 'signup'>(query.get('mode') === 'signup' ? 'signup' : 'signin');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [name, setName] = useState('');
  const [fieldErrors, setFieldErrors] = useState<{ email?: string; password?: string }>({});
  const action = useAction();
  const wallet = useAction();
  const hasWallet = browserWallet() !== undefined;
  const features = useFeatures();
  const queryError = query.get('error');
  const next = query.get('next');

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const errors = validateCredentials(mode, email, password);
    setFieldErrors(errors);
    if (errors.email || errors.password) return;
    const ok = await action.run(async () => {
      if (mode === 'signup') {
        await call(api.POST('/api/register', { body: { email: email.trim(), password, ...(name.trim() ? { name: name.trim() } : {}) } }));
      }
      await call(api.POST('/api/auth/login', { body: { email: email.trim(), password } })).catch((err: unknown) => {
        throw err instanceof ApiError && err.status === 401 ? new Error('Wrong email or password.') : err;
      });
    });
    if (ok) {
      await refresh();
      navigate(next?.startsWith('/dashboard') ? next : '/dashboard', { replace: true });
    }
  };

  return (
    <main className="auth" id="main">
      <div className="auth-card">
        <h1>{mode === 'signin' ? 'Sign in' : 'Create your account'}</h1>
        {queryError && <ErrorText error={new Error(LOGIN_ERRORS[queryError] ?? 'Sign-in did not complete. Please try again.')} />}
        {query.get('signedout') && <Notice>You are signed out.</Notice>}
        <form onSubmit={submit} noValidate>
          {mode === 'signup' && (
            <Field label="Name (optional)">
              {({ id }) => (
                <input
                  id={id}
                  value={name}
                  onChange={(e) => setName(e.target.value)}
                  autoComplete="name"
                  maxLength={LIMITS.profileNameMax}
                />
              )}
            </Field>
          )}
          <EmailField value={email} onChange={setEmail} error={fieldErrors.email} />
          <PasswordField
            label="Password"
            value={password}
            onChange={setPassword}
            error={fieldErrors.password}
            hint={mode === 'signup' ? NEW_PASSWORD_HINT : undefined}
            autoComplete={mode === 'signin' ? 'current-password' : 'new-password'}
          />
          <ErrorText error={action.error} />
          <Button type="submit" kind="primary" busy={action.busy}>
            {mode === 'signin' ? 'Sign in' : 'Create account'}
          </Button>
        </form>
        {mode === 'signin' && (features?.idp || features?.codehost) && (
          // full-page navigations: the server redirects to the provider and back to /dashboard
          <nav className="alt-sign-in" aria-label="Other ways to sign in">
            {features.idp && (
              <a className="btn btn-secondary" href="/api/auth/idp">
                Sign in with the identity provider
              </a>
            )}
            {features.codehost && (
              <a className="btn btn-secondary" href="/api/auth/codehost">
                Sign in with the code host
              </a>
            )}
          </nav>
        )}
        {hasWallet && mode === 'signin' && (
          <div className="alt-sign-in">
            <Button
              busy={wallet.busy}
              onClick={async () => {
                const w = browserWallet();
                if (!w) return;
                if (await wallet.run(() => signInWithWallet(w))) {
                  await refresh();
                  navigate(next?.startsWith('/dashboard') ? next : '/dashboard', { replace: true });
                }
              }}
            >
              Sign in with a wallet
            </Button>
            <ErrorText error={wallet.error} />
          </div>
        )}
        <p className="switch">
          {mode === 'signin' ? 'New here? ' : 'Already have an account? '}
          <button
            type="button"
            className="linklike"
            onClick={() => {
              setMode(mode === 'signin' ? 'signup' : 'signin');
              setFieldErrors({});
              action.setError(null);
            }}
          >
            {mode === 'signin' ? 'Create an account' : 'Sign in'}
          </button>
        </p>
        {features?.passwordReset ? (
          <p className="hint">
            <Link href="/reset-password">Forgot your password?</Link>
          </p>
        ) : (
          <p className="hint">
            Forgot your password? Ask the operator of this platform for a password reset link: they can make one for your account (there is
            no email reset on this server).
          </p>
        )}
      </div>
    </main>
  );
}
