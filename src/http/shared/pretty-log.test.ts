import { stripVTControlCharacters } from 'node:util';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { prettyDestination, prettyLine } from './pretty-log.ts';

const at = new Date(2026, 10, 28, 9, 5, 7).getTime();
const record = (fields: object) => JSON.stringify({ level: 30, time: at, pid: 1, hostname: 'h', ...fields });

describe('a log line at a terminal', () => {
  it('reads `HH:MM:SS LEVEL message  key=value`, without pino keys or the request id', () => {
    expect(prettyLine(record({ reqId: 'r1', agentId: 'ag_1', count: 3, ok: true, msg: 'agent started' }))).toBe(
      '09:05:07 INFO  agent started  agentId=ag_1 count=3 ok=true\n',
    );
    expect(prettyLine(JSON.stringify({ level: 40, time: at, msg: 'careful' }))).toBe('09:05:07 WARN  careful\n');
    expect(prettyLine(JSON.stringify({ level: 50, time: at, msg: 'broken' }))).toBe('09:05:07 ERROR broken\n');
  });

  it('leaves out a field whose value the message already says, never repeating it as JSON', () => {
    const list = ['bridge (BRIDGE_SECRET)', 'calendar (CALENDAR_CLIENT_ID, CALENDAR_CLIENT_SECRET)'];
    const line = prettyLine(record({ integrationsOff: list, msg: `integrations off: ${list.join('; ')}` }));
    expect(line).toBe('09:05:07 INFO  integrations off: bridge (BRIDGE_SECRET); calendar (CALENDAR_CLIENT_ID, CALENDAR_CLIENT_SECRET)\n');
    expect(prettyLine(record({ port: 5432, host: '127.0.0.1', msg: 'on 127.0.0.1:5432' }))).toBe('09:05:07 INFO  on 127.0.0.1:5432\n');
    // a value inside a longer word or number is not said: 0 is not in 3000
    expect(prettyLine(record({ applied: 0, open: 'http://localhost:3000/', msg: 'ready: open http://localhost:3000/' }))).toBe(
      '09:05:07 INFO  ready: open http://localhost:3000/  applied=0\n',
    );
  });

  it('prints nested fields as key.inner=value, arrays in brackets, text with spaces quoted, and no `{"` anywhere', () => {
    const line = prettyLine(
      record({ msg: 'done', req: { method: 'GET', url: '/a b' }, tags: ['x', 'y z'], deep: { a: { b: { c: 1 } } }, items: [{ id: 1 }] }),
    );
    expect(line).toBe('09:05:07 INFO  done  req.method=GET req.url="/a b" tags=[x,"y z"] deep.a.b=(c=1) items=[(id=1)]\n');
    expect(line).not.toContain('{"');
  });

  it("shows an error's message on the line and, at error level, its stack below, indented", () => {
    const err = {
      type: 'TypeError',
      message: 'x is undefined',
      stack: 'TypeError: x is undefined\n    at f (a.js:1:2)\n    at g (b.js:3:4)',
    };
    expect(prettyLine(record({ level: 40, err, msg: 'check failed' }))).toBe(
      '09:05:07 WARN  check failed  err="TypeError: x is undefined"\n',
    );
    expect(prettyLine(record({ level: 50, err, msg: 'crashed' }))).toBe(
      '09:05:07 ERROR crashed  err="TypeError: x is undefined"\n    at f (a.js:1:2)\n    at g (b.js:3:4)\n',
    );
  });

  it('passes a line that is not a record through', () => {
    expect(prettyLine('plain text')).toBe('plain text\n');
  });

  it('colours the level where the terminal has colours', () => {
    const line = prettyLine(record({ msg: 'hi' }), { color: true });
    expect(line).not.toBe(stripVTControlCharacters(line));
    expect(stripVTControlCharacters(line)).toBe('09:05:07 INFO  hi\n');
  });

  it('is a pino destination: records are printed in the order they are logged', () => {
    const out: string[] = [];
    const log = pino(
      { level: 'info' },
      prettyDestination((t) => out.push(t), { color: false }),
    );
    log.info({ url: 'http://127.0.0.1:3000' }, 'web listening at http://127.0.0.1:3000');
    log.warn({ n: 2 }, 'second');
    expect(out.map((l) => l.replace(/^\d\d:\d\d:\d\d /, ''))).toEqual([
      'INFO  web listening at http://127.0.0.1:3000\n',
      'WARN  second  n=2\n',
    ]);
  });
});
