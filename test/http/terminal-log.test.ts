/**
 * Logs at a terminal (LOG_FORMAT=pretty, or auto on a TTY) are one line per record, and a request
 * is one line at debug only (`GET /path 200 3 ms`): the newcomer audit of 2026-11-25 counted 13
 * printed lines per request at info, which scrolled the setup link away within seconds. JSON logs
 * keep Fastify's two records per request. The records are captured before src/http/shared/pretty-log.ts formats them.
 */
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { type LoggerOptions, pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loggerOptions } from '../../src/http/shared/logging.ts';

async function requestRecords(level: string, format: 'pretty' | 'json') {
  const records: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) records.push(JSON.parse(l));
      cb();
    },
  });
  // the same options, written to memory instead of the terminal
  const app = Fastify({ loggerInstance: pino(loggerOptions(level, format) as LoggerOptions, stream) });
  app.get('/api/things', async () => ({ ok: true }));
  await app.inject({ method: 'GET', url: '/api/things?token=secret-value&page=2' });
  app.log.warn('a start-up line');
  await app.close();
  return records;
}

describe('a request at a terminal', () => {
  it('at info: no line for it, other records as before', async () => {
    const records = await requestRecords('info', 'pretty');
    expect(records.map((r) => r.msg)).toEqual(['a start-up line']);
  });

  it('at debug: one line with method, path (secrets redacted), status and time', async () => {
    const records = await requestRecords('debug', 'pretty');
    const lines = records.filter((r) => r.msg.startsWith('GET '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 20, msg: expect.stringMatching(/^GET \/api\/things\?token=REDACTED&page=2 200 \d+ ms$/) });
    expect(records.some((r) => r.msg === 'incoming request' || r.msg === 'request completed')).toBe(false);
  });

  it('the records are printed in this thread, not by a transport worker (lines stay in the order they are logged)', () => {
    expect(loggerOptions('info', 'pretty')).not.toHaveProperty('transport');
  });
});

describe('JSON logs', () => {
  it("keep Fastify's request records at info", async () => {
    const records = await requestRecords('info', 'json');
    expect(records.map((r) => r.msg)).toEqual(['incoming request', 'request completed', 'a start-up line']);
  });
});
