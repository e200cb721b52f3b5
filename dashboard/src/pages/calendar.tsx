/**
 * Calendar (§4.6). The callback redirects here with `?connected=true` or `?error=<code>`; both are
 * shown in words. This server has no calendar connection yet (the §4.6 endpoints are not built),
 * which the page says plainly instead of offering a button that cannot work.
 */
import { useLocation } from '../router.ts';
import { ErrorText, Notice, Section } from '../ui.tsx';

export const CALENDAR_ERRORS: Record<string, string> = {
  no_code: 'The calendar provider did not send an authorization code.',
  missing_state: 'The sign-in link was incomplete. Please start again.',
  invalid_state: 'The sign-in link had expired or was not ours. Please start again.',
  token_failed: 'The calendar provider did not grant access.',
  access_denied: 'You declined access to your calendar.',
  unknown: 'Something went wrong while connecting your calendar.',
};

export function CalendarPage() {
  const { query } = useLocation();
  const error = query.get('error');
  return (
    <Section title="Calendar">
      {query.get('connected') === 'true' && <Notice kind="success">Your calendar is connected.</Notice>}
      {error && <ErrorText error={new Error(CALENDAR_ERRORS[error] ?? `The calendar provider said: ${error}.`)} />}
      <p>
        Calendar connections are not available on this server yet. Your agents can still use calendars through their own tools and channels.
      </p>
    </Section>
  );
}
