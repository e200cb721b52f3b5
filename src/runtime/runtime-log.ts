/**
 * The runtime's log: JSON lines in pino's shape (`level` as a number, `time` in ms, the fields,
 * `msg`), which the local driver's logs() reads (local-observe.service.ts). Written synchronously to one
 * file. Not pino itself: an idle agent pays for every module it loads (docs/benchmarks.md "Memory
 * of one built-in-runtime agent"), and the runtime needs four levels and one destination.
 */

/** What the gateway logs through: pino's loggers fit it too (the tests pass one). */
export type RuntimeLogger = {
  debug(fields: object, msg: string): void;
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
  error(fields: object, msg: string): void;
};

const LEVELS = { debug: 20, info: 30, warn: 40, error: 50 } as const;
export type LogLevel = keyof typeof LEVELS;
export const isLogLevel = (v: unknown): v is LogLevel => typeof v === 'string' && Object.hasOwn(LEVELS, v);

/** Errors as pino writes them (type, message, stack); JSON.stringify would write `{}`. */
const errors = (_key: string, value: unknown) =>
  value instanceof Error ? { type: value.name, message: value.message, stack: value.stack } : value;

/** A logger appending to `file` (created when missing); lines below `level` are dropped. */
export function createFileLogger(options: { file: string; level: LogLevel; base: Record<string, unknown> }): RuntimeLogger {
  const fs = process.getBuiltinModule('node:fs');
  const fd = fs.openSync(options.file, 'a');
  const min = LEVELS[options.level];
  const line = (level: LogLevel) => (fields: object, msg: string) => {
    if (LEVELS[level] < min) return;
    try {
      fs.writeSync(fd, `${JSON.stringify({ level: LEVELS[level], time: Date.now(), ...options.base, ...fields, msg }, errors)}\n`);
    } catch {
      // a full disk must not take the gateway down with it
    }
  };
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}
