/**
 * A local SMTP server (the `smtp-server` package, the real protocol) that keeps every message it
 * receives for the tests to read: SMTP_URL = `smtp://<user>:<pass>@127.0.0.1:<port>` points the
 * platform's mailer (src/domains/accounts/mailer.client.ts) at it. It requires the given credentials
 * (AUTH over the plain connection: STARTTLS is off, the test has no certificate to trust).
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export type ReceivedMail = {
  /** envelope */
  from: string;
  to: string[];
  /** the authenticated user of the session */
  user: string | undefined;
  subject: string;
  headers: Map<string, string>;
  /** the decoded text/plain body */
  text: string;
  raw: string;
};

export type FakeSmtp = {
  url: string;
  messages: ReceivedMail[];
  /** Resolves with the first message (counting those already received) that `match` accepts. */
  waitFor(match: (m: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
};

export async function startFakeSmtp(options: { user?: string; pass?: string } = {}): Promise<FakeSmtp> {
  const user = options.user ?? 'mailer';
  const pass = options.pass ?? 'mail-secret';
  const messages: ReceivedMail[] = [];
  const waiters = new Set<() => void>();

  const server = new SMTPServer({
    authOptional: false,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === user && auth.password === pass) callback(null, { user });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          user: typeof session.user === 'string' ? session.user : undefined,
          ...parse(raw),
          raw,
        });
        for (const w of waiters) w();
        callback(null);
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;

  return {
    url: `smtp://${encodeURIComponent(user)}:${encodeURIComponent(pass)}@127.0.0.1:${port}`,
    messages,
    waitFor(match, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = messages.find(match);
          if (!m) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(m);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching mail within ${timeoutMs} ms (${messages.length} received)`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Headers (unfolded, names lower-cased) and the decoded body of a single-part text message. */
function parse(raw: string): { headers: Map<string, string>; subject: string; text: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = split === -1 ? raw : raw.slice(0, split);
  const body = split === -1 ? '' : raw.slice(split + 4);
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  const encoding = (headers.get('content-transfer-encoding') ?? '7bit').toLowerCase();
  let text: string;
  if (encoding === 'quoted-printable') {
    const bytes = body.replace(/=\r?\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
    text = Buffer.from(bytes, 'latin1').toString('utf8');
  } else if (encoding === 'base64') text = Buffer.from(body, 'base64').toString('utf8');
  else text = body;
  return { headers, subject: headers.get('subject') ?? '', text: text.replace(/\r\n/g, '\n') };
}
