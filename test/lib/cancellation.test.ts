/**
 * Cancellation stands in for an AbortController on the AI proxy's path (src/lib/cancellation.ts):
 * it must behave as an AbortSignal does where the AI layer and undici use one. The upstream
 * abort through undici itself, with a Cancellation as the request's signal, is covered end to
 * end by test/ai/streaming.test.ts (a client disconnect cancels the upstream request).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { Cancellation } from '../../src/lib/cancellation.ts';

describe('Cancellation', () => {
  it('calls each listener once, with the reason set, and ignores later aborts', () => {
    const c = new Cancellation();
    const calls: unknown[] = [];
    c.addEventListener('abort', () => calls.push(c.reason));
    c.addEventListener('abort', () => calls.push('second'));
    expect(c.aborted).toBe(false);
    const reason = new Error('gone');
    c.abort(reason);
    c.abort(new Error('again'));
    expect(c.aborted).toBe(true);
    expect(calls).toEqual([reason, 'second']);
  });

  it('does not call a removed listener, nor one added after the abort', () => {
    const c = new Cancellation();
    const calls: string[] = [];
    const removed = () => calls.push('removed');
    c.addEventListener('abort', removed);
    c.removeEventListener('abort', removed);
    c.removeEventListener('abort', () => {}); // unknown listener: nothing happens
    c.abort();
    c.addEventListener('abort', () => calls.push('late'));
    expect(calls).toEqual([]);
    expect((c.reason as Error).name).toBe('AbortError');
  });

  it('runs the other listeners when one throws, and reports the error as an uncaught exception', async () => {
    const c = new Cancellation();
    const calls: string[] = [];
    const uncaught = new Promise<unknown>((resolve) => {
      const listeners = process.listeners('uncaughtException');
      process.removeAllListeners('uncaughtException');
      process.once('uncaughtException', (err) => {
        for (const l of listeners) process.on('uncaughtException', l);
        resolve(err);
      });
    });
    c.addEventListener('abort', () => {
      throw new Error('listener failed');
    });
    c.addEventListener('abort', () => calls.push('ran'));
    c.abort();
    expect(calls).toEqual(['ran']);
    expect(((await uncaught) as Error).message).toBe('listener failed');
  });

  it('aborts an undici request it is the signal of, before and during the call', async () => {
    const server = createServer(() => {}); // never answers
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const during = new Cancellation();
      const pending = pool.request({ method: 'GET', path: '/', signal: during as unknown as AbortSignal });
      setTimeout(() => during.abort(new Error('client disconnected')), 50);
      await expect(pending).rejects.toThrow('client disconnected');

      const before = new Cancellation();
      before.abort(new Error('already gone'));
      await expect(pool.request({ method: 'GET', path: '/', signal: before as unknown as AbortSignal })).rejects.toThrow('already gone');
    } finally {
      await pool.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
