/**
 * The log at a terminal (LOG_FORMAT=pretty, or auto on a TTY): each pino record as one line a
 * person reads, `HH:MM:SS INFO  message  key=value …`. The message is printed once: a field whose
 * value the message already says (a URL, a port, a list the message names) is left out, the other
 * fields follow as `key=value`, nested ones as `key.inner=value`, never as a JSON object again. An
 * error's stack follows its line, indented, at level error and above. Written synchronously in
 * this thread (no transport worker), so lines keep their order and a line logged just before
 * `process.exit` is printed.
 */
import { styleText } from 'node:util';

type Fields = { [key: string]: unknown };

const LABELS: { [level: number]: string } = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLORS: { [level: number]: Parameters<typeof styleText>[0] } = {
  10: 'gray',
  20: 'blue',
  30: 'green',
  40: 'yellow',
  50: 'red',
  60: 'magenta',
};
/** pino's own keys, and the request id (in the JSON format only: a terminal reads requests as one line each) */
const SKIPPED = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'reqId']);
/** the longest a single value is printed; the JSON format keeps it whole */
const MAX_VALUE = 300;

const pad = (n: number) => String(n).padStart(2, '0');

function clock(time: unknown): string {
  const d = typeof time === 'number' ? new Date(time) : new Date();
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** `value` said in `msg` as a whole (not inside a longer word or number). */
function saidIn(msg: string, value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0 && value.every((v) => saidIn(msg, v));
  if (typeof value !== 'string' && typeof value !== 'number') return false;
  const text = String(value);
  if (text === '') return false;
  for (let at = msg.indexOf(text); at !== -1; at = msg.indexOf(text, at + 1)) {
    const before = msg[at - 1];
    const after = msg[at + text.length];
    if ((before === undefined || !/\w/.test(before)) && (after === undefined || !/\w/.test(after))) return true;
  }
  return false;
}

function shorten(text: string): string {
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE - 1)}…` : text;
}

/** A value as it reads in `key=value`: bare when it has no space or quote, quoted otherwise. */
function scalar(value: unknown): string {
  if (typeof value === 'string') return value !== '' && /^[^\s"=]+$/.test(value) ? shorten(value) : JSON.stringify(shorten(value));
  if (value === undefined) return 'undefined';
  return String(value);
}

/** `key=value` pairs of a field, an object's fields under `key.inner`, an array as `[a,b]`. */
function pairs(key: string, value: unknown, depth: number): string[] {
  if (Array.isArray(value))
    return [`${key}=[${value.map((v) => (typeof v === 'object' && v !== null ? inline(v) : scalar(v))).join(',')}]`];
  if (typeof value === 'object' && value !== null) {
    if (depth >= 2) return [`${key}=${inline(value)}`];
    return Object.entries(value).flatMap(([k, v]) => pairs(`${key}.${k}`, v, depth + 1));
  }
  return [`${key}=${scalar(value)}`];
}

/** An object inside an array or deeper than two levels: `(k=v k=v)`, never JSON. */
function inline(value: object): string {
  const inner = Array.isArray(value) ? value.map((v) => scalar(v)) : Object.entries(value).map(([k, v]) => `${k}=${scalar(v)}`);
  return shorten(`(${inner.join(' ')})`);
}

/** What an `err` field (pino's error serializer: type, message, stack, …) reads as on the line. */
function errorText(err: Fields): string {
  const message = typeof err.message === 'string' ? err.message : '';
  const type = typeof err.type === 'string' && err.type !== 'Error' ? `${err.type}: ` : '';
  return `${type}${message}`;
}

export type PrettyOptions = { color?: boolean };

/** One pino JSON record as the terminal line(s) that print it; a line that is not a record passes through. */
export function prettyLine(json: string, options: PrettyOptions = {}): string {
  let record: Fields;
  try {
    const parsed: unknown = JSON.parse(json);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return json.endsWith('\n') ? json : `${json}\n`;
    record = parsed as Fields;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof record.level === 'number' ? record.level : 30;
  const msg = typeof record.msg === 'string' ? record.msg : '';
  const paint = (color: Parameters<typeof styleText>[0], text: string) =>
    options.color ? styleText(color, text, { validateStream: false }) : text;
  const fields: string[] = [];
  let stack: string | undefined;
  for (const [key, value] of Object.entries(record)) {
    if (SKIPPED.has(key) || value === undefined || saidIn(msg, value)) continue;
    if ((key === 'err' || key === 'error') && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const err = value as Fields;
      const text = errorText(err);
      if (text && !saidIn(msg, text)) fields.push(`${key}=${scalar(text)}`);
      if (level >= 50 && typeof err.stack === 'string') stack = err.stack;
      continue;
    }
    fields.push(...pairs(key, value, 0));
  }
  const label = LABELS[level] ?? `L${level}`;
  let line = `${paint('gray', clock(record.time))} ${paint(LEVEL_COLORS[level] ?? 'white', label.padEnd(5))} ${msg}`;
  if (fields.length > 0) line += `  ${paint('gray', fields.join(' '))}`;
  if (stack) {
    // the stack's first line repeats the error's message, which the line already carries
    const frames = stack.split('\n').slice(1);
    if (frames.length > 0) line += `\n${frames.map((f) => `    ${f.trim()}`).join('\n')}`;
  }
  return `${line}\n`;
}

/** A pino destination that prints each record with prettyLine() through `write` (default: stdout, in colour where it supports colour). */
export function prettyDestination(
  write: (text: string) => void = (text) => process.stdout.write(text),
  options: PrettyOptions = { color: process.stdout.hasColors?.() === true },
): { write(chunk: string): void } {
  return {
    write(chunk: string) {
      // pino writes one record per call; a chunk is split anyway, so no record is read as two
      for (const json of chunk.split('\n')) if (json.trim() !== '') write(prettyLine(json, options));
    },
  };
}
