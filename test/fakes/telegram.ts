/**
 * A local Telegram Bot API: `POST /bot<token>/sendMessage` with JSON `{chat_id, text}` answers
 * `{ok:true,result:{message_id,chat,date,text}}` as the real API does; a wrong token answers 401
 * `{ok:false,error_code:401,description:'Unauthorized'}`, a missing chat_id or text 400. Records
 * every accepted message. `failNext` makes the next N calls answer 502 (retry tests).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './read-body.ts';

export type FakeTelegram = {
  /** the WATCHDOG_BOT_API_URL value */
  apiUrl: string;
  messages: { chatId: string; text: string }[];
  failNext: number;
  close(): Promise<void>;
};

export async function startFakeTelegram(options: { token: string }): Promise<FakeTelegram> {
  let messageId = 0;
  const state: FakeTelegram = { apiUrl: '', messages: [], failNext: 0, close: async () => {} };
  const server = createServer(async (req, res) => {
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const m = /^\/bot([^/]+)\/sendMessage$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !m) return send(404, { ok: false, error_code: 404, description: 'Not Found' });
    if (m[1] !== options.token) return send(401, { ok: false, error_code: 401, description: 'Unauthorized' });
    let body: { chat_id?: string | number; text?: string };
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      return send(400, { ok: false, error_code: 400, description: 'Bad Request: invalid JSON' });
    }
    if (state.failNext > 0) {
      state.failNext -= 1;
      return send(502, { ok: false, error_code: 502, description: 'Bad Gateway' });
    }
    if (body.chat_id === undefined || body.chat_id === '')
      return send(400, { ok: false, error_code: 400, description: 'Bad Request: chat_id is empty' });
    if (!body.text) return send(400, { ok: false, error_code: 400, description: 'Bad Request: message text is empty' });
    state.messages.push({ chatId: String(body.chat_id), text: body.text });
    send(200, {
      ok: true,
      result: {
        message_id: ++messageId,
        chat: { id: Number(body.chat_id) || body.chat_id, type: 'private' },
        date: Math.floor(Date.now() / 1000),
        text: body.text,
      },
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((r) => server.close(() => r()));
  return state;
}
