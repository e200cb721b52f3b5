/**
 * Password reset by email (docs/security.md "Password reset"; the endpoints are ours, §4.18 shows
 * none). `/reset-password` asks for the mail; the mailed link `/reset-password?token=…` sets the
 * new password. The token leaves the address bar as soon as the page runs (and the server sends
 * the page with `Referrer-Policy: no-referrer`), so it is neither in the history nor sent anywhere.
 */
import { type FormEvent, useEffect, useState } from 'react';
import { api, call } from '../api/client.ts';
import { EmailField, emailError, NEW_PASSWORD_HINT, PasswordField, passwordError } from '../credential-fields.tsx';
import { useFeatures } from '../features.ts';
import { useSession } from '../session.tsx';
import { Button, ErrorText, Link, Notice, useAction } from '../ui.tsx';

export function ResetPasswordPage() {
  // read once from the address the mail opened; the effect below takes it out of the address bar
  const [token, setToken] = useState(() => new URLSearchParams(location.search).get('token'));
  useEffect(() => {
    if (new URLSearchParams(location.search).has('token')) history.replaceState(null, '', location.pathname);
  }, []);
  return (
    <main className="auth" id="main">
      <div className="auth-card">{token ? <NewPassword token={token} onNewLink={() => setToken(null)} /> : <RequestLink />}</div>
    </main>
  );
}

function RequestLink() {
  const features = useFeatures();
  const [email, setEmail] = useState('');
  const [fieldError, setFieldError] = useState<string>();
  const [sent, setSent] = useState<string>();
  const action = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const value = email.trim();
    const error = emailError(value);
    setFieldError(error);
    if (error) return;
    await action.run(async () => {
      const res = await call(api.POST('/api/auth/password-reset/request', { body: { email: value } }));
      setSent(res.message);
    });
  };

  return (
    <>
      <h1>Reset your password</h1>
      {features && !features.passwordReset ? (
        <Notice kind="warning">Password reset by email is not set up on this server: ask its operator for a password reset link.</Notice>
      ) : sent ? (
        <Notice kind="success">{sent}</Notice>
      ) : (
        <form onSubmit={submit} noValidate>
          <p>Enter the email you sign in with. We will mail you a link to set a new password.</p>
          <EmailField value={email} onChange={setEmail} error={fieldError} />
          <ErrorText error={action.error} />
          <Button type="submit" kind="primary" busy={action.busy}>
            Send reset link
          </Button>
        </form>
      )}
      <p className="switch">
        <Link href="/login">Back to sign in</Link>
      </p>
    </>
  );
}

function NewPassword({ token, onNewLink }: { token: string; onNewLink: () => void }) {
  const { refresh } = useSession();
  const [password, setPassword] = useState('');
  const [fieldError, setFieldError] = useState<string>();
  const [done, setDone] = useState(false);
  const action = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const error = passwordError(password, true);
    setFieldError(error);
    if (error) return;
    const ok = await action.run(() => call(api.POST('/api/auth/password-reset/confirm', { body: { token, password } })));
    if (ok) {
      setDone(true);
      await refresh(); // every session ended, this browser's too
    }
  };

  if (done) {
    return (
      <>
        <h1>Password changed</h1>
        <Notice kind="success">Your new password is set, and every session of your account has been signed out.</Notice>
        <p>
          <Link href="/login">Sign in with your new password</Link>
        </p>
      </>
    );
  }
  return (
    <>
      <h1>Set a new password</h1>
      <form onSubmit={submit} noValidate>
        <PasswordField
          label="New password"
          value={password}
          onChange={setPassword}
          error={fieldError}
          hint={NEW_PASSWORD_HINT}
          autoComplete="new-password"
        />
        <ErrorText error={action.error} />
        <Button type="submit" kind="primary" busy={action.busy}>
          Set new password
        </Button>
      </form>
      {action.error ? (
        <p className="switch">
          <button type="button" className="linklike" onClick={onNewLink}>
            Request a new link
          </button>
        </p>
      ) : null}
    </>
  );
}
