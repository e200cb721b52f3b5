/**
 * The one-time notice of GET /api/auth/session (`user.notice`), shown above every dashboard page
 * until dismissed (DELETE /api/auth/notice). Its one kind so far: the first time the identity
 * provider or the code host proved the account's address, a password set before that proof
 * (possibly by someone who registered the address first) was cleared (docs/identity.md).
 */
import { api, call } from './api/client.ts';
import { useFeatures } from './features.ts';
import { useSession } from './session.tsx';
import { Button, ErrorText, Link, useAction } from './ui.tsx';

export function AccountNotice() {
  const { user, refresh } = useSession();
  const features = useFeatures();
  const dismiss = useAction();
  const notice = user?.notice;
  if (!notice) return null;
  return (
    <section className="notice notice-warning account-notice" aria-label="Notice about your account">
      <p>{notice.message}</p>
      <div className="account-notice-actions">
        {features?.passwordReset ? <Link href="/reset-password">Set a password</Link> : null}
        <Button
          busy={dismiss.busy}
          onClick={() =>
            dismiss.run(async () => {
              await call(api.DELETE('/api/auth/notice'));
              await refresh();
            })
          }
        >
          Dismiss
        </Button>
      </div>
      <ErrorText error={dismiss.error} />
    </section>
  );
}
