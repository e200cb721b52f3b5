/** A webhook receiver: records every JSON POST body; `status` sets what it answers (default 200). */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeWebhook = { url: string; received: Record<string, any>[]; status: number; close(): Promise<void> };

export async function startFakeWebhook(): Promise<FakeWebhook> {
  const state: FakeWebhook = { url: '', received: [], status: 200, close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (state.status >= 200 && state.status < 300) {
        try {
          state.received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        } catch {
          state.received.push({ invalid: true });
        }
      }
      res.writeHead(state.status, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/watchdog`;
  state.close = () => new Promise<void>((r) => server.close(() => r()));
  return state;
}
