/**
 * The one logger type of the domains and the workers: the part of pino's logger (and so of
 * Fastify's, which is pino's) that the code calls. A service is given one, never builds one;
 * src/platform.ts passes the platform's pino logger, tests pass pino at level `silent` or
 * `silentLogger`. The HTTP layer may keep Fastify's own types.
 */

type LogFn = {
  /** fields (an `err` is serialised with its stack), then the message */
  (fields: object, msg?: string): void;
  (msg: string): void;
};

export type Logger = {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
};

const nothing = () => {};

/** A logger that writes nothing (a service built without one). */
export const silentLogger: Logger = { debug: nothing, info: nothing, warn: nothing, error: nothing };
