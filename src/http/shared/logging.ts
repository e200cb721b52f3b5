/**
 * Logger and request-id options shared by both apps. Logs are pino JSON lines with the request
 * id on every line; they never contain passwords, cookies, keys or tokens.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyServerOptions } from 'fastify';

/** Query parameters whose values are secrets (webhook secret, OAuth code/state, tokens). */
const SECRET_QUERY = /^(secret|token|code|state|key|api_?key|password|signature|access_token|refresh_token)$/i;

export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const k of [...params.keys()]) if (SECRET_QUERY.test(k)) params.set(k, 'REDACTED');
  return `${url.slice(0, q)}?${params.toString()}`;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** `auto` (the default): readable lines when stdout is a terminal, JSON lines otherwise. */
export type LogFormat = 'auto' | 'json' | 'pretty';

export function isPretty(format: LogFormat = 'auto'): boolean {
  return format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true);
}

export function loggerOptions(level: string, format: LogFormat = 'auto'): FastifyServerOptions['logger'] & object {
  return {
    level,
    // pino-pretty in pino's worker thread: the same records, formatted for a person at a terminal
    ...(isPretty(format)
      ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
      : {}),
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'req.headers["x-bridge-secret"]',
        'req.headers["x-hosting-secret"]',
        'req.headers["payment-signature"]',
        'res.headers["set-cookie"]',
        '*.password',
        '*.token',
        '*.apiKey',
        '*.privateKey',
        '*.signature',
      ],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: { method: string; url: string; ip?: string; id?: string }) => ({
        method: req.method,
        url: redactUrl(req.url),
        remoteAddress: req.ip,
      }),
    },
  };
}

export const requestIdOptions = {
  requestIdHeader: 'x-request-id',
  /** Honour a sane incoming x-request-id (tracing through a proxy); otherwise a fresh UUID. */
  genReqId: (req: IncomingMessage): string => {
    const incoming = req.headers['x-request-id'];
    return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  },
} satisfies Partial<FastifyServerOptions>;
