/**
 * The calendar provider client (src/domains/calendar/calendar.client.ts) against the local provider:
 * a provider that never answers fails within the client's timeout (the service then answers 502,
 * test/calendar/calendar.test.ts), and a token endpoint refusal carries its OAuth error.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CalendarApiError, createCalendarClient } from '../../src/domains/calendar/calendar.client.ts';
import { type FakeCalendar, startFakeCalendar } from '../fakes/calendar-api.ts';

let fake: FakeCalendar;
beforeAll(async () => {
  fake = await startFakeCalendar();
});
afterAll(async () => fake?.close());

const client = (timeoutMs: number) =>
  createCalendarClient({
    clientId: fake.clientId,
    clientSecret: fake.clientSecret,
    tokenUrl: fake.tokenUrl,
    apiUrl: fake.apiUrl,
    timeoutMs,
  });

it('a provider that never answers is a CalendarApiError (status 0) after the timeout, not a hang', async () => {
  fake.knobs.hangApi = true;
  const started = Date.now();
  const err = await client(300)
    .primaryCalendar('any-token')
    .catch((e: unknown) => e);
  fake.knobs.hangApi = false;
  expect(err).toBeInstanceOf(CalendarApiError);
  expect((err as CalendarApiError).status).toBe(0);
  expect(Date.now() - started).toBeLessThan(3000);
});

it('a refused refresh carries the OAuth error and no token in its message', async () => {
  const err = (await client(2000)
    .refresh('1//not-a-refresh-token')
    .catch((e: unknown) => e)) as CalendarApiError;
  expect(err).toBeInstanceOf(CalendarApiError);
  expect(err.status).toBe(400);
  expect(err.oauthError).toBe('invalid_grant');
  expect(err.message).not.toContain('1//not-a-refresh-token');
});

it('a refused code exchange carries the provider status and OAuth error and not the code; a 500 keeps its status', async () => {
  const refused = (await client(2000)
    .exchangeCode('4/not-a-code', 'http://127.0.0.1:1/api/calendar/callback')
    .catch((e: unknown) => e)) as CalendarApiError;
  expect(refused).toBeInstanceOf(CalendarApiError);
  expect([refused.status, refused.oauthError]).toEqual([400, 'invalid_grant']);
  expect(refused.message).not.toContain('4/not-a-code');
  fake.knobs.failExchange = 'error';
  const failed = (await client(2000)
    .exchangeCode('4/any', 'http://127.0.0.1:1/api/calendar/callback')
    .catch((e: unknown) => e)) as CalendarApiError;
  delete fake.knobs.failExchange;
  expect(failed).toBeInstanceOf(CalendarApiError);
  expect(failed.status).toBe(500);
});
