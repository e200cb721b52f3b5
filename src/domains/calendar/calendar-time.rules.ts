/**
 * Wall-clock time in the calendar's IANA timezone (§4.6 availability: "one-hour slots from 09:00 to
 * 23:00" are the calendar's hours, not the server's). Built on Intl only: the offset of a zone at
 * an instant is read from `Intl.DateTimeFormat`, so daylight-saving changes come from the runtime's
 * time zone database.
 */
import { LIMITS } from '../../config/limits.ts';

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** True when the runtime knows `timeZone` (an IANA name such as `America/New_York`). */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

type Parts = { year: number; month: number; day: number; hour: number; minute: number; second: number };

function partsAt(ms: number, timeZone: string): Parts {
  const p: Record<string, number> = {};
  for (const { type, value } of formatter(timeZone).formatToParts(new Date(ms))) if (type !== 'literal') p[type] = Number(value);
  return { year: p.year!, month: p.month!, day: p.day!, hour: p.hour!, minute: p.minute!, second: p.second! };
}

/** The zone's offset from UTC at instant `ms`, in minutes (east positive). */
export function offsetMinutes(ms: number, timeZone: string): number {
  const p = partsAt(ms, timeZone);
  const asUtc = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return Math.round((asUtc - Math.floor(ms / 1000) * 1000) / 60_000);
}

/**
 * The instant of a wall-clock time in `timeZone`. Two passes: the offset at the first guess may
 * differ from the offset at the answer when a daylight-saving change lies between them.
 */
export function zonedToUtc(date: string, hour: number, minute: number, timeZone: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const naive = Date.UTC(y, m - 1, d, hour, minute);
  let ms = naive - offsetMinutes(naive, timeZone) * 60_000;
  ms = naive - offsetMinutes(ms, timeZone) * 60_000;
  return ms;
}

/** RFC 3339 with the zone's offset at that instant, e.g. `2026-03-02T09:00:00-05:00`. */
export function formatInZone(ms: number, timeZone: string): string {
  const p = partsAt(ms, timeZone);
  const off = offsetMinutes(ms, timeZone);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const sign = off < 0 ? '-' : '+';
  const abs = Math.abs(off);
  return `${pad(p.year, 4)}-${pad(p.month)}-${pad(p.day)}T${pad(p.hour)}:${pad(p.minute)}:${pad(p.second)}${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/** Today's date (YYYY-MM-DD) in `timeZone`. */
export function todayIn(ms: number, timeZone: string): string {
  return formatInZone(ms, timeZone).slice(0, 10);
}

/** A real calendar day written YYYY-MM-DD (rejects 2026-02-30). */
export function isDate(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const [y, m, d] = value.split('-').map(Number) as [number, number, number];
  const t = new Date(Date.UTC(y, m - 1, d));
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}

export type Slot = { start: string; end: string };

/**
 * §4.6 availability: the one-hour slots from 09:00 to 23:00 of `date` in `timeZone`, split into
 * those that overlap a busy interval and those that do not. Busy intervals are reported as the
 * provider gave them.
 */
export function availability(date: string, timeZone: string, busy: { start: string; end: string }[]) {
  const intervals = busy.map((b) => ({ start: Date.parse(b.start), end: Date.parse(b.end) })).filter((b) => b.end > b.start);
  const availableSlots: Slot[] = [];
  for (let h = LIMITS.calendarSlotFirstHour; h < LIMITS.calendarSlotEndHour; h++) {
    const start = zonedToUtc(date, h, 0, timeZone);
    const end = zonedToUtc(date, h + 1, 0, timeZone);
    if (intervals.some((b) => b.start < end && b.end > start)) continue;
    availableSlots.push({ start: formatInZone(start, timeZone), end: formatInZone(end, timeZone) });
  }
  return { availableSlots, busySlots: busy.map((b) => ({ start: b.start, end: b.end })), date };
}

/** The window of `date`'s slots as instants (what freeBusy is asked about). */
export function slotWindow(date: string, timeZone: string): { timeMin: string; timeMax: string } {
  return {
    timeMin: new Date(zonedToUtc(date, LIMITS.calendarSlotFirstHour, 0, timeZone)).toISOString(),
    timeMax: new Date(zonedToUtc(date, LIMITS.calendarSlotEndHour, 0, timeZone)).toISOString(),
  };
}
