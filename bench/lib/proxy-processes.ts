/**
 * The processes of the proxy benches, each in its own process as an outside measurement runs them:
 *   upstream — a node:http OpenAI-compatible server answering a fixed 100-token completion (JSON,
 *              or SSE when the body asks for `stream: true`), after BENCH_AI_DELAY_MS (0: at once);
 *   floor    — a bare Node proxy: Fastify and an undici Pool of 128 connections forwarding
 *              POST /v1/chat/completions, no hooks, schemas, auth, logging or usage. What any Node
 *              proxy pays on this machine; the platform's targets are ratios to it in the same run;
 *   backend  — the platform's backend app (bench/lib/backend-child.ts) on a bench database.
 * Each prints its port on its first stdout line.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** ~100 tokens of answer, as the outside measurement's upstream sends. */
export const COMPLETION_TEXT =
  'Sure. Here is a short answer to your question, written so that it is about one hundred tokens long: ' +
  'a proxy in front of a model provider should add as little as it can to each request, keep its ' +
  'connections to the provider open, count the tokens it was billed for exactly once, and stream the ' +
  'answer through as it arrives. Everything else it does, such as checking the caller, its plan and ' +
  'its limits, should cost microseconds, not milliseconds.';

const UPSTREAM = `
import { createServer } from 'node:http';
const delayMs = Number(process.argv[1]);
const text = ${JSON.stringify(COMPLETION_TEXT)};
const usage = { prompt_tokens: 420, completion_tokens: 100, total_tokens: 520 };
const json = (model) => JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1, model,
  choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
  usage,
});
const words = text.split(/(?= )/);
const sse = (model) => {
  const chunk = (delta, extra = {}) => 'data: ' + JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1, model,
    choices: [{ index: 0, delta, finish_reason: null }], ...extra }) + '\\n\\n';
  let out = chunk({ role: 'assistant', content: '' });
  for (let i = 0; i < words.length; i += 8) out += chunk({ content: words.slice(i, i + 8).join('') });
  return out + 'data: ' + JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1, model, choices: [], usage }) + '\\n\\ndata: [DONE]\\n\\n';
};
const server = createServer((req, res) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    let model = 'unknown', stream = false;
    try { const b = JSON.parse(raw); model = b.model ?? model; stream = b.stream === true; } catch {}
    const send = () => {
      const body = stream ? sse(model) : json(model);
      res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    if (delayMs > 0) setTimeout(send, delayMs); else send();
  });
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

/** The stdin protocol of profile-on-stdin.ts (`profile`, `save <file>`), so the floor is profiled as the backend child is. */
const PROFILE_ON_STDIN = `
const { answerProfileRequests } = await import(${JSON.stringify(new URL('./profile-on-stdin.ts', import.meta.url).href)});
await answerProfileRequests();
`;

/** The floor: run in ROOT so it resolves fastify and undici. argv: upstream origin, JSON of extra upstream headers. */
const FLOOR = `
import Fastify from 'fastify';
import { Pool } from 'undici';
const pool = new Pool(process.argv[1], { connections: 128 });
const headers = { 'content-type': 'application/json', ...JSON.parse(process.argv[2] ?? '{}') };
const app = Fastify({ logger: false });
app.post('/v1/chat/completions', async (request, reply) => {
  const r = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers, body: JSON.stringify(request.body) });
  reply.code(r.statusCode).header('content-type', r.headers['content-type']);
  return reply.send(r.body);
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(String(app.server.address().port) + '\\n');
${PROFILE_ON_STDIN}
`;

export type Proc = {
  proc: ChildProcess;
  port: number;
  /** writes `line` to the child's stdin and resolves with its next answer line (ANSWERS) */
  ask(line: string): Promise<string>;
};

/** Spawns `args` and waits for the port: the first stdout line that is a number. */
export function spawnWithPort(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Proc> {
  const proc = spawn(process.execPath, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'], env });
  const waiting: ((line: string) => void)[] = [];
  const ask = (line: string) =>
    new Promise<string>((resolve) => {
      waiting.push(resolve);
      proc.stdin!.write(`${line}\n`);
    });
  // stdout carries the protocol (the port, then answers to ask()); anything else a child prints
  // there (a library's warning, a stray log line) is passed to stderr instead of being read as one
  return new Promise<Proc>((resolve, reject) => {
    let port: number | undefined;
    let rest = '';
    const onLine = (line: string) => {
      if (port === undefined && /^\d+$/.test(line.trim())) {
        port = Number(line.trim());
        resolve({ proc, port, ask });
      } else if (port !== undefined && ANSWERS.has(line.trim())) waiting.shift()?.(line.trim());
      else if (line.trim() !== '') process.stderr.write(`[${args.at(-1)?.slice(0, 24) ?? 'child'}] ${line}\n`);
    };
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
      rest += d;
      for (let i = rest.indexOf('\n'); i !== -1; i = rest.indexOf('\n')) {
        onLine(rest.slice(0, i));
        rest = rest.slice(i + 1);
      }
    });
    proc.once('exit', (code) => reject(new Error(`${args.at(-1)?.slice(0, 40) ?? 'child'} exited (${code}) before listening`)));
  });
}

/** What bench/lib/profile-on-stdin.ts answers on stdout, the only lines read as answers to ask(). */
const ANSWERS = new Set(['profiling', 'saved']);

export async function startUpstream100(delayMs: number): Promise<Proc & { base: string }> {
  const p = await spawnWithPort(['--input-type=module', '-e', UPSTREAM, String(delayMs)]);
  return { ...p, base: `http://127.0.0.1:${p.port}/v1` };
}

/** `headers`: sent upstream on every request (an agent gateway's token); the floor itself checks nothing. */
export async function startFloorProcess(upstreamOrigin: string, headers: Record<string, string> = {}): Promise<Proc & { url: string }> {
  const p = await spawnWithPort(['--input-type=module', '-e', FLOOR, upstreamOrigin, JSON.stringify(headers)]);
  return { ...p, url: `http://127.0.0.1:${p.port}/v1/chat/completions` };
}

/**
 * A chat body of a realistic size (~2.5 KB): a system prompt and a few turns of conversation, as
 * a chat client sends them, not a one-word ping.
 */
export function realisticChatBody(model: string, extra: Record<string, unknown> = {}): string {
  const turn = (i: number) =>
    `Question ${i}: in the service we discussed, how should the retry policy treat a request that timed out after the ` +
    'provider had already started streaming, and what should the client see?';
  return JSON.stringify({
    model,
    messages: [
      {
        role: 'system',
        content:
          'You are a careful senior engineer. Answer concisely, cite the constraint you rely on, and say when you are unsure. ' +
          'Prefer concrete steps over general advice.',
      },
      ...[1, 2, 3, 4, 5].flatMap((i) => [
        { role: 'user', content: turn(i) },
        {
          role: 'assistant',
          content: `Answer ${i}: a timed-out stream is not retried once bytes reached the client; it ends with an error event.`,
        },
      ]),
      { role: 'user', content: 'Summarise the policy in one paragraph.' },
    ],
    temperature: 0.2,
    max_tokens: 256,
    ...extra,
  });
}
