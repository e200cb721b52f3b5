/**
 * Logger and request-id options shared by both apps. Logs are pino JSON lines with the request
 * id on every line; at a terminal they are readable lines instead (./pretty-log.ts), one per
 * record, with requests at debug only. They never contain passwords, cookies, keys or tokens.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyServerOptions } from 'fastify';
import { type LogFn, type Logger, pino } from 'pino';
import { prettyDestination } from './pretty-log.ts';

/** Query parameters whose values are secrets (webhook secret, OAuth code/state, tokens). */
const SECRET_QUERY = /^(secret|token|code|state|key|api_?key|password|signature|access_token|refresh_token)$/i;

export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const k of [...params.keys()]) if (SECRET_QUERY.test(k)) params.set(k, 'REDACTED');
  return `${url.slice(0, q)}?${params.toString()}`;
}

const CENSOR = '[redacted]';
/** Secret fields: censored as a top-level key of a log object and one level down (`{ body: { password } }`). */
const SECRET_FIELDS = ['password', 'token', 'apiKey', 'privateKey', 'signature'] as const;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const has = (o: object, key: string) => Object.hasOwn(o, key);

/**
 * A copy of `o` with `keys` censored: same prototype and own properties, an own accessor read
 * into a value (V8's `stack` is one, bound to the original error), so an Error keeps its class,
 * message and stack.
 */
function censored<T extends object>(o: T, keys: readonly string[]): T {
  const descriptors: PropertyDescriptorMap = Object.getOwnPropertyDescriptors(o);
  for (const [k, d] of Object.entries(descriptors)) {
    if (d.get) descriptors[k] = { value: Reflect.get(o, k), enumerable: d.enumerable, writable: true, configurable: true };
  }
  const copy = Object.create(Object.getPrototypeOf(o), descriptors) as T;
  for (const k of keys) Object.defineProperty(copy, k, { value: CENSOR, enumerable: true, writable: true, configurable: true });
  return copy;
}

/**
 * pino's `formatters.log`: what a log line carries, with secrets censored. The input is never
 * changed (it may be a live request or a caller's object): anything with a secret is copied
 * first; a line without secrets, nearly every line, is checked and passed through without a copy.
 * Replaces pino's `redact` option, whose per-line cost was three times the rest of the logging
 * (8.3 against 2.6 µs for the two lines of a request) and which made every request's child logger
 * 3x dearer, with the same coverage plus top-level secret keys. Headers need no rule here: `req`
 * and `res` go through serializers that keep none (pino's old `req.headers.*` paths applied to
 * that serialized output, so they never matched anything). A child logger's bindings are not
 * formatted by pino (only the root's are); the only children are Fastify's per-request ones,
 * whose one binding is the validated request id. Bind identifiers to a child, never secrets.
 */
export function redactSecrets(obj: Record<string, unknown>): Record<string, unknown> {
  let out = obj;
  const top = SECRET_FIELDS.filter((k) => has(obj, k));
  if (top.length > 0) out = censored(obj, top);
  for (const key in obj) {
    const value = obj[key];
    if (!isObject(value) || !has(obj, key)) continue;
    const inner = SECRET_FIELDS.filter((k) => has(value, k));
    if (inner.length === 0) continue;
    if (out === obj) out = censored(obj, []);
    out[key] = censored(value, inner);
  }
  return out;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** `auto` (the default): readable lines when stdout is a terminal, JSON lines otherwise. */
export type LogFormat = 'auto' | 'json' | 'pretty';

export function isPretty(format: LogFormat = 'auto'): boolean {
  return format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true);
}

/** What Fastify's request records carry that the terminal line needs. */
type CompletedRecord = { res: { statusCode: number; request: { method: string; url: string } }; responseTime: number };

/**
 * pino's `hooks.logMethod` at a terminal: each request is one line, at debug only —
 * `GET /api/agents 200 3 ms` — instead of Fastify's two info records per request, which
 * the terminal once printed as 13 lines (a dashboard polling every few seconds scrolled the start-up
 * lines, the setup link among them, out of view within seconds). JSON logs keep Fastify's records.
 */
function terminalRequestLines(this: Logger, args: Parameters<LogFn>, method: LogFn, level: number) {
  if (level === 30 && args[1] === 'incoming request') return;
  if (level === 30 && args[1] === 'request completed') {
    if (!this.isLevelEnabled('debug')) return;
    const { res, responseTime } = args[0] as unknown as CompletedRecord;
    return this.debug(`${res.request.method} ${redactUrl(res.request.url)} ${res.statusCode} ${Math.round(responseTime)} ms`);
  }
  return method.apply(this, args);
}

export function loggerOptions(level: string, format: LogFormat = 'auto'): FastifyServerOptions['logger'] & object {
  const pretty = isPretty(format);
  return {
    level,
    // at a terminal, a request is one line at debug (the records go to createLogger's pretty destination)
    ...(pretty ? { hooks: { logMethod: terminalRequestLines } } : {}),
    // our own redaction (redactSecrets above), not pino's `redact` option: same fields, a third of
    // the cost per line (docs/benchmarks.md "The cached request and logging")
    formatters: { log: redactSecrets },
    serializers: {
      req: (req: { method: string; url: string; ip?: string; id?: string }) => ({
        method: req.method,
        url: redactUrl(req.url),
        remoteAddress: req.ip,
      }),
    },
  };
}

/**
 * The platform's logger: JSON lines on stdout, or at a terminal (LOG_FORMAT) the same records as
 * readable lines (./pretty-log.ts), printed in this thread in the order they are logged. main.ts
 * makes one and gives it to the platform, so the web app, the backend and the workers share it.
 */
export function createLogger(level: string, format: LogFormat = 'auto'): Logger {
  return isPretty(format) ? pino(loggerOptions(level, format), prettyDestination()) : pino(loggerOptions(level, format));
}

export const requestIdOptions = {
  requestIdHeader: 'x-request-id',
  /** Honour a sane incoming x-request-id (tracing through a proxy); otherwise a fresh UUID. */
  genReqId: (req: IncomingMessage): string => {
    const incoming = req.headers['x-request-id'];
    return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  },
} satisfies Partial<FastifyServerOptions>;
