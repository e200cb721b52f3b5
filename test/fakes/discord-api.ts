/**
 * A local Discord: the REST API under `/api/v10` and the gateway WebSocket at `/gateway`, on one
 * port, speaking the real wire protocol so @discordjs/rest, @discordjs/ws and @discordjs/core run
 * unchanged against it.
 *
 * REST: `GET /users/@me`, `GET /gateway/bot` (`url` is this gateway), `POST /channels/:id/messages`
 * (JSON `{content}`, at most 2000 characters as Discord enforces), `POST /channels/:id/typing` (204).
 * A wrong `Authorization: Bot <token>` answers 401 `{message:'401: Unauthorized', code:0}`.
 *
 * Gateway (JSON encoding, no compression; anything else is closed with 4002 as Discord does): HELLO
 * (op 10), IDENTIFY (op 2) → READY (op 0), a wrong token closes with 4004, Message Content asked of
 * a bot without it 4014; heartbeat (op 1) → ACK (op 11); RESUME (op 6) of a known session →
 * RESUMED, of another → INVALID_SESSION (op 9). `deliver` sends a MESSAGE_CREATE to every
 * identified session; `drop` closes every socket from Discord's side.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIMessage, APIUser } from '@discordjs/core';
import { type WebSocket, WebSocketServer } from 'ws';
import { readBody } from './read-body.ts';

/** The parts of a MESSAGE_CREATE a test chooses; the rest is filled in as Discord would. */
export type FakeDiscordMessage = {
  channelId: string;
  /** absent for a direct message */
  guildId?: string;
  author: { id: string; username: string; global_name?: string | null; bot?: boolean };
  content: string;
};

export type FakeDiscord = {
  /** the DISCORD_API_URL value (what @discordjs/rest calls `api`) */
  apiUrl: string;
  /** the DISCORD_GATEWAY_URL value */
  gatewayUrl: string;
  /** the bot the token belongs to */
  bot: APIUser;
  /** accepted messages, with the `allowed_mentions` they asked for */
  sent: { channelId: string; content: string; allowedMentions: unknown }[];
  /** channel ids of typing indicators */
  typing: string[];
  /** every IDENTIFY payload's intents and query string, in order */
  identifies: { intents: number; query: string }[];
  /** RESUMEs of a known session */
  resumes: number;
  heartbeats: number;
  /** the close code of every gateway socket that closed, whichever side closed it, in order */
  closes: number[];
  /** gateway sockets open now */
  readonly openSockets: number;
  /** sends a MESSAGE_CREATE to every identified session; returns how many received it */
  deliver(message: FakeDiscordMessage): number;
  /** closes every gateway socket from Discord's side with this code (a restart, a 4000 error) */
  drop(code: number): void;
  close(): Promise<void>;
};

const MESSAGE_CONTENT = 1 << 15;

let snowflake = 1_300_000_000_000_000_000n;
const nextId = () => String(++snowflake);

export async function startFakeDiscord(options: {
  token: string;
  /** the HELLO's heartbeat interval in milliseconds (Discord sends about 41250) */
  heartbeatInterval?: number;
  /** false: the bot's Message Content intent is off in the Developer Portal, so asking for it closes with 4014 */
  messageContentIntent?: boolean;
}): Promise<FakeDiscord> {
  const bot: APIUser = { id: nextId(), username: 'platform-bot', discriminator: '0', global_name: null, avatar: null, bot: true };
  type Session = { id: string; seq: number };
  /** identified (or resumed) sockets, and every session ever started, which a RESUME may continue */
  const sessions = new Map<WebSocket, Session>();
  const started = new Map<string, Session>();
  const sockets = new Set<WebSocket>();
  const state: FakeDiscord = {
    apiUrl: '',
    gatewayUrl: '',
    bot,
    sent: [],
    typing: [],
    identifies: [],
    resumes: 0,
    heartbeats: 0,
    closes: [],
    get openSockets() {
      return sockets.size;
    },
    deliver(input) {
      const d = message(input.channelId, input.author, input.content, input.guildId);
      for (const [socket, session] of sessions) {
        session.seq += 1;
        socket.send(JSON.stringify({ op: 0, t: 'MESSAGE_CREATE', s: session.seq, d }));
      }
      return sessions.size;
    },
    drop(code) {
      for (const socket of sockets) socket.close(code);
    },
    close: async () => {
      for (const socket of sockets) socket.terminate();
      await new Promise<void>((r) => wss.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const server = createServer(async (req, res) => {
    const send = (status: number, body?: unknown) => {
      if (body === undefined) return res.writeHead(status).end();
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const path = decodeURIComponent((req.url ?? '').split('?')[0] ?? '');
    if (!path.startsWith('/api/v10/')) return send(404, { message: '404: Not Found', code: 0 });
    if (req.headers.authorization !== `Bot ${options.token}`) return send(401, { message: '401: Unauthorized', code: 0 });
    const route = path.slice('/api/v10'.length);
    if (req.method === 'GET' && route === '/users/@me') return send(200, { ...bot, flags: 0, mfa_enabled: false });
    if (req.method === 'GET' && route === '/gateway/bot')
      return send(200, {
        url: state.gatewayUrl,
        shards: 1,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 86_400_000, max_concurrency: 1 },
      });
    const typing = /^\/channels\/(\d+)\/typing$/.exec(route);
    if (req.method === 'POST' && typing?.[1]) {
      state.typing.push(typing[1]);
      return send(204);
    }
    const messages = /^\/channels\/(\d+)\/messages$/.exec(route);
    if (req.method === 'POST' && messages?.[1]) {
      let body: { content?: unknown; allowed_mentions?: unknown };
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        return send(400, { message: 'The request body contains invalid JSON.', code: 50109 });
      }
      const content = typeof body.content === 'string' ? body.content : '';
      if (!content) return send(400, { message: 'Cannot send an empty message', code: 50006 });
      if (content.length > 2000)
        return send(400, {
          message: 'Invalid Form Body',
          code: 50035,
          errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' }] } },
        });
      state.sent.push({ channelId: messages[1], content, allowedMentions: body.allowed_mentions });
      return send(200, message(messages[1], { id: bot.id, username: bot.username, bot: true }, content));
    }
    send(404, { message: '404: Not Found', code: 0 });
  });

  const message = (channelId: string, author: FakeDiscordMessage['author'], content: string, guildId?: string) => {
    const body: APIMessage & { guild_id?: string } = {
      id: nextId(),
      channel_id: channelId,
      author: { discriminator: '0', avatar: null, global_name: null, ...author },
      content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: [],
      mention_roles: [],
      attachments: [],
      embeds: [],
      pinned: false,
      type: 0,
    };
    if (guildId) body.guild_id = guildId;
    return body;
  };

  const wss = new WebSocketServer({ server, path: '/gateway' });
  wss.on('connection', (socket, req) => {
    sockets.add(socket);
    const query = (req.url ?? '').split('?')[1] ?? '';
    const params = new URLSearchParams(query);
    const frame = (payload: { op: number; d: unknown; s?: number | null; t?: string | null }) =>
      socket.send(JSON.stringify({ s: null, t: null, ...payload }));
    socket.on('close', (code) => {
      sockets.delete(socket);
      sessions.delete(socket);
      state.closes.push(code);
    });
    if (params.get('v') !== '10' || params.get('encoding') !== 'json' || params.has('compress')) {
      socket.close(4002, 'Error while decoding payload.');
      return;
    }
    frame({ op: 10, d: { heartbeat_interval: options.heartbeatInterval ?? 41_250 } });
    socket.on('message', (raw) => {
      let payload: { op?: number; d?: Record<string, unknown> | null };
      try {
        payload = JSON.parse(raw.toString());
      } catch {
        socket.close(4002, 'Error while decoding payload.');
        return;
      }
      if (payload.op === 1) {
        state.heartbeats += 1;
        return frame({ op: 11, d: null });
      }
      if (payload.op === 2) {
        if (sessions.has(socket)) return socket.close(4005, 'Already authenticated.');
        if (payload.d?.token !== options.token) return socket.close(4004, 'Authentication failed.');
        const intents = Number(payload.d?.intents);
        state.identifies.push({ intents, query });
        if (options.messageContentIntent === false && intents & MESSAGE_CONTENT) return socket.close(4014, 'Disallowed intent(s).');
        const session = { id: randomUUID().replaceAll('-', ''), seq: 1 };
        sessions.set(socket, session);
        started.set(session.id, session);
        return frame({
          op: 0,
          t: 'READY',
          s: session.seq,
          d: {
            v: 10,
            user: bot,
            session_id: session.id,
            resume_gateway_url: state.gatewayUrl,
            guilds: [],
            shard: [0, 1],
            application: { id: bot.id, flags: 0 },
          },
        });
      }
      if (payload.op === 6) {
        // Discord would replay what the session missed; this fake delivers only to open sockets
        const session = started.get(String(payload.d?.session_id));
        if (payload.d?.token !== options.token || !session) return frame({ op: 9, d: false });
        state.resumes += 1;
        sessions.set(socket, session);
        return frame({ op: 0, t: 'RESUMED', s: session.seq, d: {} });
      }
      if (!sessions.has(socket)) return socket.close(4003, 'Not authenticated.');
    });
  });

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  state.apiUrl = `http://127.0.0.1:${port}/api`;
  state.gatewayUrl = `ws://127.0.0.1:${port}/gateway`;

  return state;
}
