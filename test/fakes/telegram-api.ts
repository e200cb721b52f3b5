/**
 * A local Telegram Bot API server for the channel tests (docs/channels.md), real HTTP speaking the
 * protocol grammY speaks: `POST /bot<token>/<method>` with a JSON (or form) body, answers
 * `{ok:true,result}` or `{ok:false,error_code,description}`. Methods: getMe, deleteWebhook,
 * setWebhook, getUpdates (long poll: held until an update arrives or `timeout` seconds pass, and
 * 409 Conflict for a second poller of one bot, as Telegram answers), sendMessage, sendChatAction.
 * An unknown token is 401 Unauthorized. Every call is recorded (token, method, body).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './read-body.ts';

export type TelegramCall = { token: string; method: string; body: Record<string, any> };
type Update = { update_id: number; message: Record<string, unknown> };

export type FakeTelegramApi = {
  /** TELEGRAM_API_URL */
  apiUrl: string;
  calls: TelegramCall[];
  /** a bot Telegram knows: its token and identity */
  addBot(token: string, bot: { id: number; username: string }): void;
  /** Telegram forgets the bot (its owner revoked the token): every call with it is 401 from now on */
  removeBot(token: string): void;
  /** a private text message from `from` to the bot of `token` (what a person typing in the app sends) */
  sendToBot(
    token: string,
    from: { id: number; username?: string; first_name?: string },
    text: string,
    chat?: { id: number; type: string },
  ): void;
  /** what the bot of `token` sent with sendMessage, in order */
  sent(token: string): { chat_id: string; text: string }[];
  /** calls of `method` by the bot of `token` */
  callsOf(token: string, method: string): TelegramCall[];
  /** long polls held open right now, per token */
  polling(token: string): number;
  close(): Promise<void>;
};

const readParams = async (req: IncomingMessage): Promise<Record<string, any>> => {
  const raw = await readBody(req);
  if (!raw) return {};
  const type = String(req.headers['content-type'] ?? '');
  if (type.includes('application/json')) return JSON.parse(raw);
  if (type.includes('x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(raw));
  return {};
};

export async function startFakeTelegramApi(): Promise<FakeTelegramApi> {
  const bots = new Map<string, { id: number; username: string }>();
  const queues = new Map<string, Update[]>();
  const waiters = new Map<string, Set<() => void>>();
  const pollers = new Map<string, number>();
  let updateId = 1000;
  let messageId = 1;

  const wake = (token: string) => {
    for (const w of waiters.get(token) ?? []) w();
    waiters.get(token)?.clear();
  };

  const send = (res: ServerResponse, status: number, body: unknown) => {
    if (res.writableEnded || res.destroyed) return;
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const ok = (res: ServerResponse, result: unknown) => send(res, 200, { ok: true, result });
  const fail = (res: ServerResponse, code: number, description: string) => send(res, code, { ok: false, error_code: code, description });

  async function getUpdates(token: string, body: Record<string, any>, req: IncomingMessage, res: ServerResponse) {
    const offset = Number(body.offset ?? 0);
    // updates below the offset are confirmed: Telegram forgets them
    const queue = (queues.get(token) ?? []).filter((u) => u.update_id >= offset);
    queues.set(token, queue);
    const limit = Number(body.limit ?? 100);
    if (queue.length > 0 || !Number(body.timeout)) return ok(res, queue.slice(0, limit));
    if ((pollers.get(token) ?? 0) > 0)
      return fail(res, 409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running');
    pollers.set(token, (pollers.get(token) ?? 0) + 1);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Number(body.timeout) * 1000);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      if (!waiters.has(token)) waiters.set(token, new Set());
      waiters.get(token)!.add(done);
      req.on('close', done);
      res.on('close', done);
    });
    pollers.set(token, (pollers.get(token) ?? 1) - 1);
    if (!bots.has(token)) return fail(res, 401, 'Unauthorized');
    ok(res, (queues.get(token) ?? []).filter((u) => u.update_id >= offset).slice(0, limit));
  }

  const fake: FakeTelegramApi = {
    apiUrl: '',
    calls: [],
    addBot: (token, bot) => void bots.set(token, bot),
    removeBot(token) {
      bots.delete(token);
      wake(token); // a held long poll answers (and the next one is refused)
    },
    sendToBot(token, from, text, chat) {
      const update: Update = {
        update_id: ++updateId,
        message: {
          message_id: messageId++,
          date: Math.floor(Date.now() / 1000),
          chat: chat ?? { id: from.id, type: 'private', ...(from.username ? { username: from.username } : {}) },
          from: { is_bot: false, first_name: from.first_name ?? 'Someone', ...from },
          text,
          ...(text.startsWith('/') ? { entities: [{ type: 'bot_command', offset: 0, length: text.split(/\s/)[0]!.length }] } : {}),
        },
      };
      if (!queues.has(token)) queues.set(token, []);
      queues.get(token)!.push(update);
      wake(token);
    },
    sent: (token) => fake.callsOf(token, 'sendMessage').map((c) => ({ chat_id: String(c.body.chat_id), text: String(c.body.text) })),
    callsOf: (token, method) => fake.calls.filter((c) => c.token === token && c.method === method),
    polling: (token) => pollers.get(token) ?? 0,
    close: () =>
      new Promise((resolve) => {
        for (const token of waiters.keys()) wake(token);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const server = createServer(async (req, res) => {
    const m = /^\/bot([^/]+)\/(\w+)$/.exec((req.url ?? '').split('?')[0]!);
    if (!m) return fail(res, 404, 'Not Found');
    const token = decodeURIComponent(m[1]!);
    const method = m[2]!;
    let body: Record<string, any>;
    try {
      body = await readParams(req);
    } catch {
      return fail(res, 400, 'Bad Request: invalid JSON');
    }
    fake.calls.push({ token, method, body });
    const bot = bots.get(token);
    if (!bot) return fail(res, 401, 'Unauthorized');
    switch (method) {
      case 'getMe':
        return ok(res, { id: bot.id, is_bot: true, first_name: bot.username, username: bot.username, can_join_groups: true });
      case 'deleteWebhook':
      case 'setWebhook':
        return ok(res, true);
      case 'getUpdates':
        return getUpdates(token, body, req, res);
      case 'sendMessage': {
        if (!body.chat_id || !body.text) return fail(res, 400, 'Bad Request: message text is empty');
        if (String(body.text).length > 4096) return fail(res, 400, 'Bad Request: message is too long');
        return ok(res, {
          message_id: messageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: Number(body.chat_id) },
          text: body.text,
        });
      }
      case 'sendChatAction':
        return ok(res, true);
      default:
        return fail(res, 404, 'Not Found: method not found');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
