/**
 * Calendar (§4.6). The callback redirects here with `?connected=true` or `?error=<code>`; both are
 * shown in words. When the server has a calendar OAuth client (GET /api/features `calendar`): a
 * "Connect calendar" button, then the next 30 days' events (with Delete), the free one-hour slots of a chosen day
 * and a form to create an event. Times typed here are wall-clock times in the calendar's timezone
 * (the API reads a time without an offset that way).
 */
import { type FormEvent, useState } from 'react';
import { api, call } from '../api/client.ts';
import type { paths } from '../api/openapi.gen.ts';
import { useFeatures } from '../features.ts';
import { useLocation } from '../router.ts';
import { Button, type Column, DataTable, Empty, ErrorText, Field, Notice, Section, Spinner, useAction, useData } from '../ui.tsx';

export const CALENDAR_ERRORS: Record<string, string> = {
  no_code: 'The calendar provider did not send an authorization code.',
  missing_state: 'The sign-in link was incomplete. Please start again.',
  invalid_state:
    'The connection link had expired, was already used, or was started in another browser or by another account. Please start again.',
  not_signed_in: 'You were not signed in when the calendar provider sent you back, so nothing was connected. Please connect again.',
  token_failed: 'The calendar provider did not grant access.',
  access_denied: 'You declined access to your calendar.',
  unknown: 'Something went wrong while connecting your calendar.',
};

type GetAnswer = paths['/api/calendar']['get']['responses'][200]['content']['application/json'];
type EventList = Extract<GetAnswer, { events: unknown }>;
type CalendarEvent = EventList['events'][number];
type Availability = Extract<GetAnswer, { availableSlots: unknown }>;

const getCalendar = async (query: { action: string; date?: string }) => call(api.GET('/api/calendar', { params: { query } }));

export function CalendarPage() {
  const { query } = useLocation();
  const features = useFeatures();
  const error = query.get('error');
  const configured = features?.calendar === true;
  const status = useData(
    async () => (configured ? ((await getCalendar({ action: 'status' })) as { connected: boolean }) : { connected: false }),
    [configured],
  );
  const connect = useAction();
  const connected = configured && status.data?.connected === true;
  return (
    <>
      <Section title="Calendar">
        {query.get('connected') === 'true' && <Notice kind="success">Your calendar is connected.</Notice>}
        {error && <ErrorText error={new Error(CALENDAR_ERRORS[error] ?? `The calendar provider said: ${error}.`)} />}
        {features === undefined || (configured && status.loading && !status.data) ? (
          <Spinner />
        ) : !configured ? (
          <p>
            Calendar connections are not available on this server yet. Your agents can still use calendars through their own tools and
            channels.
          </p>
        ) : !status.data ? (
          <ErrorText error={status.error} />
        ) : connected ? (
          // right after the callback the notice above already says so
          query.get('connected') !== 'true' && <p>Your calendar is connected. Its events and free time are below.</p>
        ) : (
          <>
            <p>Connect your calendar to see your events and free time here and add events.</p>
            <Button
              kind="primary"
              busy={connect.busy}
              onClick={() =>
                connect.run(async () => {
                  const { authUrl } = (await call(api.POST('/api/calendar', { body: { action: 'connect' } }))) as { authUrl: string };
                  window.location.assign(authUrl);
                })
              }
            >
              Connect calendar
            </Button>
            <ErrorText error={connect.error} />
          </>
        )}
      </Section>
      {connected && <Connected />}
    </>
  );
}

function Connected() {
  const events = useData(async () => (await getCalendar({ action: 'list' })) as EventList);
  const remove = useAction();
  const timezone = events.data?.timezone;
  const when = (t: CalendarEvent['start']) =>
    t.dateTime
      ? new Date(t.dateTime).toLocaleString(undefined, { timeZone: timezone, dateStyle: 'medium', timeStyle: 'short' })
      : (t.date ?? '—');
  const columns: Column<CalendarEvent>[] = [
    { header: 'Title', cell: (e) => e.summary || '(no title)' },
    { header: 'Starts', cell: (e) => when(e.start) },
    { header: 'Ends', cell: (e) => when(e.end) },
    { header: 'Location', cell: (e) => e.location || '—' },
    {
      header: 'Actions',
      hideHeader: true,
      cell: (e) => (
        <Button
          kind="danger"
          label={`Delete ${e.summary || 'event'}`}
          busy={remove.busy}
          onClick={() =>
            remove.run(async () => {
              await call(api.POST('/api/calendar', { body: { action: 'delete-event', eventId: e.id } }));
              await events.reload();
            })
          }
        >
          Delete
        </Button>
      ),
    },
  ];
  return (
    <>
      <Section title="Upcoming events">
        {events.loading && !events.data ? (
          <Spinner />
        ) : !events.data ? (
          <ErrorText error={events.error} />
        ) : events.data.events.length === 0 ? (
          <Empty>No events in the next 30 days.</Empty>
        ) : (
          <DataTable columns={columns} rows={events.data.events} rowKey={(e) => e.id} caption="Upcoming events" />
        )}
        <ErrorText error={remove.error} />
      </Section>
      <AvailabilityView timezone={timezone} />
      <CreateEvent timezone={timezone} onCreated={() => events.reload()} />
    </>
  );
}

/** The free one-hour slots of a day (09:00 to 23:00 in the calendar's timezone). */
function AvailabilityView({ timezone }: { timezone: string | undefined }) {
  const [day, setDay] = useState('');
  const [result, setResult] = useState<Availability | null>(null);
  const load = useAction();
  const show = (e: FormEvent) => {
    e.preventDefault();
    void load.run(async () => setResult((await getCalendar({ action: 'availability', ...(day ? { date: day } : {}) })) as Availability));
  };
  // the slots are RFC 3339 in the calendar's own offset: their clock time is the calendar's
  const clock = (iso: string) => iso.slice(11, 16);
  return (
    <Section title="Availability">
      <form className="inline-form" onSubmit={show} noValidate>
        <Field label="Day" hint={`Leave empty for today${timezone ? ` (${timezone})` : ''}.`}>
          {({ id, describedBy }) => (
            <input id={id} type="date" value={day} onChange={(e) => setDay(e.target.value)} aria-describedby={describedBy} />
          )}
        </Field>
        <Button type="submit" busy={load.busy}>
          Show availability
        </Button>
      </form>
      <ErrorText error={load.error} />
      {result && (
        <>
          <h3>Free on {result.date}</h3>
          {result.availableSlots.length === 0 ? (
            <Empty>No free hour between 09:00 and 23:00.</Empty>
          ) : (
            <ul aria-label={`Free slots on ${result.date}`} className="slot-list">
              {result.availableSlots.map((s) => (
                <li key={s.start}>
                  {clock(s.start)}–{clock(s.end)}
                </li>
              ))}
            </ul>
          )}
          <p className="muted">
            {result.busySlots.length} busy {result.busySlots.length === 1 ? 'period' : 'periods'} between 09:00 and 23:00.
          </p>
        </>
      )}
    </Section>
  );
}

function CreateEvent({ timezone, onCreated }: { timezone: string | undefined; onCreated: () => unknown }) {
  const [form, setForm] = useState({ title: '', start: '', end: '', location: '' });
  const [errors, setErrors] = useState<{ title?: string; start?: string; end?: string }>({});
  const [created, setCreated] = useState<string | null>(null);
  const create = useAction();
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm((f) => ({ ...f, [k]: e.target.value }));
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const errs = {
      ...(form.title.trim() ? {} : { title: 'Give the event a title.' }),
      ...(form.start ? {} : { start: 'Choose when it starts.' }),
      ...(form.end ? {} : { end: 'Choose when it ends.' }),
      ...(form.start && form.end && form.end <= form.start ? { end: 'The end must be after the start.' } : {}),
    };
    setErrors(errs);
    setCreated(null);
    if (Object.keys(errs).length > 0) return;
    const ok = await create.run(() =>
      call(
        api.POST('/api/calendar', {
          body: {
            action: 'create-event',
            title: form.title.trim(),
            start: form.start,
            end: form.end,
            ...(form.location.trim() ? { location: form.location.trim() } : {}),
          },
        }),
      ),
    );
    if (ok) {
      setCreated(form.title.trim());
      setForm({ title: '', start: '', end: '', location: '' });
      await onCreated();
    }
  };
  const hint = `In the calendar's timezone${timezone ? ` (${timezone})` : ''}.`;
  return (
    <Section title="Create an event">
      <form onSubmit={submit} noValidate>
        <Field label="Title" error={errors.title}>
          {({ id, describedBy, invalid }) => (
            <input id={id} value={form.title} onChange={set('title')} aria-describedby={describedBy} aria-invalid={invalid} />
          )}
        </Field>
        <Field label="Start" hint={hint} error={errors.start}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              type="datetime-local"
              value={form.start}
              onChange={set('start')}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <Field label="End" hint={hint} error={errors.end}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              type="datetime-local"
              value={form.end}
              onChange={set('end')}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <Field label="Location (optional)">
          {({ id, describedBy }) => <input id={id} value={form.location} onChange={set('location')} aria-describedby={describedBy} />}
        </Field>
        <Button type="submit" kind="primary" busy={create.busy}>
          Create event
        </Button>
      </form>
      <ErrorText error={create.error} />
      {created && <Notice kind="success">Event “{created}” created.</Notice>}
    </Section>
  );
}
