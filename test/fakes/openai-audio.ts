/**
 * A local OpenAI-compatible audio API over real HTTP: `POST /v1/audio/speech` (JSON in, audio
 * bytes out) and `POST /v1/audio/transcriptions` (multipart/form-data in, `{text}` out). It
 * records what it received so tests can check the wire format.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeAudio = {
  url: string;
  speech: { body: any; authorization: string | undefined }[];
  transcriptions: { contentType: string; file: Buffer; fields: Record<string, string> }[];
  fail: boolean;
  close(): Promise<void>;
};

export async function startFakeAudio(apiKey: string): Promise<FakeAudio> {
  const fake: FakeAudio = {
    url: '',
    speech: [],
    transcriptions: [],
    fail: false,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${apiKey}`) return send(401, { error: { message: 'bad key' } });
    if (fake.fail) return send(500, { error: { message: 'down' } });
    if (req.method === 'POST' && req.url === '/v1/audio/speech') {
      const body = JSON.parse(raw.toString('utf8'));
      fake.speech.push({ body, authorization: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      return res.end(Buffer.from(`ID3-fake-audio:${body.voice}:${body.input}`));
    }
    if (req.method === 'POST' && req.url === '/v1/audio/transcriptions') {
      const contentType = req.headers['content-type'] ?? '';
      const boundary = /boundary=(.+)$/.exec(contentType)?.[1];
      if (!boundary) return send(400, { error: { message: 'multipart required' } });
      const fields: Record<string, string> = {};
      let file = Buffer.alloc(0);
      for (const part of raw.toString('latin1').split(`--${boundary}`)) {
        const m = /name="([^"]+)"(?:; filename="[^"]*")?\r\n(?:[^\r\n]+\r\n)*\r\n([\s\S]*)\r\n$/.exec(part);
        if (!m) continue;
        if (m[1] === 'file') file = Buffer.from(m[2]!, 'latin1');
        else fields[m[1]!] = m[2]!;
      }
      fake.transcriptions.push({ contentType, file, fields });
      if (!fields.model) return send(400, { error: { message: 'model required' } });
      return send(200, { text: `transcribed ${file.length} bytes` });
    }
    send(404, { error: { message: 'not found' } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
