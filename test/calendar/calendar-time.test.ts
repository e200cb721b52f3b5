/** §4.6 availability's wall-clock arithmetic (src/domains/calendar/calendar-time.rules.ts) across zones and daylight-saving changes. */
import { describe, expect, it } from 'vitest';
import { availability, formatInZone, isDate, todayIn, zonedToUtc } from '../../src/domains/calendar/calendar-time.rules.ts';

describe('calendar time', () => {
  it('a wall-clock hour in a zone is the right instant, on both sides of a daylight-saving change', () => {
    // New York moves to daylight time on 2026-03-08 at 02:00
    expect(new Date(zonedToUtc('2026-03-07', 9, 0, 'America/New_York')).toISOString()).toBe('2026-03-07T14:00:00.000Z');
    expect(new Date(zonedToUtc('2026-03-08', 9, 0, 'America/New_York')).toISOString()).toBe('2026-03-08T13:00:00.000Z');
    // Berlin leaves daylight time on 2026-10-25 at 03:00
    expect(new Date(zonedToUtc('2026-10-24', 9, 0, 'Europe/Berlin')).toISOString()).toBe('2026-10-24T07:00:00.000Z');
    expect(new Date(zonedToUtc('2026-10-25', 9, 0, 'Europe/Berlin')).toISOString()).toBe('2026-10-25T08:00:00.000Z');
    // a half-hour offset
    expect(formatInZone(zonedToUtc('2026-03-02', 9, 0, 'Asia/Kolkata'), 'Asia/Kolkata')).toBe('2026-03-02T09:00:00+05:30');
  });

  it('fourteen one-hour slots from 09:00 to 23:00 on a DST-change day, each an hour long', () => {
    const { availableSlots } = availability('2026-03-08', 'America/New_York', []);
    expect(availableSlots).toHaveLength(14);
    expect(availableSlots[0]).toEqual({ start: '2026-03-08T09:00:00-04:00', end: '2026-03-08T10:00:00-04:00' });
    expect(availableSlots.at(-1)).toEqual({ start: '2026-03-08T22:00:00-04:00', end: '2026-03-08T23:00:00-04:00' });
    for (const s of availableSlots) expect(Date.parse(s.end) - Date.parse(s.start)).toBe(3_600_000);
  });

  it('a busy interval removes exactly the slots it overlaps; touching ends do not count', () => {
    const { availableSlots } = availability('2026-03-02', 'UTC', [{ start: '2026-03-02T10:00:00Z', end: '2026-03-02T12:00:00Z' }]);
    expect(availableSlots.map((s) => s.start.slice(11, 13))).not.toContain('10');
    expect(availableSlots.map((s) => s.start.slice(11, 13))).not.toContain('11');
    expect(availableSlots.map((s) => s.start.slice(11, 13))).toContain('09');
    expect(availableSlots.map((s) => s.start.slice(11, 13))).toContain('12');
    expect(availableSlots).toHaveLength(12);
  });

  it("today is the calendar's day, and dates must be real", () => {
    const lateUtc = Date.parse('2026-03-03T02:00:00Z');
    expect(todayIn(lateUtc, 'America/Los_Angeles')).toBe('2026-03-02');
    expect(todayIn(lateUtc, 'Asia/Tokyo')).toBe('2026-03-03');
    expect(isDate('2026-02-29')).toBe(false);
    expect(isDate('2028-02-29')).toBe(true);
    expect(isDate('2026-3-1')).toBe(false);
  });
});
