/**
 * Admin rights and credits from a shell (docs/admin.md):
 *   npm run admin -- <email>            make the account with that email an admin
 *   npm run admin -- --revoke <email>   take the rights back
 *   npm run admin -- credit <email> <usd> [note] [--request-id <id>]
 *                                       credit the account's wallet through the ledger; the journal
 *                                       names the operator account (not a person) as the admin.
 *                                       The same --request-id credits once (default: a new id).
 *   npm run admin -- reset-link <email>  print a one-time link that sets a new password for the
 *                                       account (valid 24 hours; the way to reset a password
 *                                       without SMTP): hand it to the user yourself.
 * Uses DATABASE_URL when set; otherwise the embedded database in DATA_DIR: the running
 * platform's server when it is up (its port is in postmaster.pid), else a server started just
 * for this command.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../src/config/env.ts';
import { resolveSecrets, storedSecret } from '../src/config/secrets.ts';
import { createDb } from '../src/db/client.ts';
import { EmbeddedPostgresError, type EmbeddedServer, embeddedClusterDir, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { createAdminResetLinks } from '../src/domains/accounts/password-reset.service.ts';
import { OPERATOR_ID } from '../src/domains/admin/admin.repo.ts';
import { type AdminService, createAdminService } from '../src/domains/admin/admin.service.ts';
import { createLedgerService } from '../src/domains/payments/ledger/ledger.service.ts';
import { createSessionWalletService } from '../src/domains/session-wallet/session-wallet.service.ts';
import { isAppError } from '../src/lib/errors.ts';
import { usdToMicros } from '../src/lib/money.ts';

const USAGE = [
  'usage: npm run admin -- [--revoke] <email>',
  '       npm run admin -- credit <email> <usd> [note] [--request-id <id>]',
  '       npm run admin -- reset-link <email>',
].join('\n');

type Command =
  | { kind: 'grant'; email: string; isAdmin: boolean }
  | { kind: 'credit'; email: string; amountMicros: number; note: string | null; requestId: string }
  | { kind: 'reset-link'; email: string };

function parse(argv: string[]): Command | undefined {
  if (argv[0] === 'reset-link') {
    if (argv.length !== 2 || !argv[1]!.includes('@')) return undefined;
    return { kind: 'reset-link', email: argv[1]! };
  }
  if (argv[0] === 'credit') {
    const args = argv.slice(1);
    const at = args.indexOf('--request-id');
    let requestId: string = randomUUID();
    if (at >= 0) {
      if (!args[at + 1]) return undefined;
      requestId = args[at + 1]!;
      args.splice(at, 2);
    }
    const [email, usd, ...note] = args;
    const amountMicros = usdToMicros(usd);
    if (!email?.includes('@') || amountMicros === undefined) return undefined;
    return { kind: 'credit', email, amountMicros, note: note.join(' ') || null, requestId };
  }
  const revoke = argv.includes('--revoke');
  const rest = argv.filter((a) => a !== '--revoke');
  if (rest.length !== 1 || !rest[0]!.includes('@')) return undefined;
  return { kind: 'grant', email: rest[0]!, isAdmin: !revoke };
}

async function run(admin: AdminService, cmd: Command): Promise<number> {
  if (cmd.kind === 'grant') {
    const row = await admin.setAdminByEmail(cmd.email, cmd.isAdmin);
    if (!row) {
      console.error(`No account with the email ${cmd.email}`);
      return 1;
    }
    console.log(`${row.email} is ${row.is_admin ? 'now an admin' : 'no longer an admin'} (takes effect within 5 s on running processes)`);
    return 0;
  }
  const userId = await admin.findUserIdByEmail(cmd.email);
  if (!userId) {
    console.error(`No account with the email ${cmd.email}`);
    return 1;
  }
  if (cmd.kind === 'reset-link') {
    const r = await admin.resetLink({ id: OPERATOR_ID, isAdmin: true }, userId);
    console.log(
      `Password reset link for ${r.email} (works once, until ${r.expiresAt}; their earlier links no longer work). ` +
        `Give it to them yourself: ${r.link}`,
    );
    return 0;
  }
  const { credit, replayed } = await admin.creditUser({ id: OPERATOR_ID, isAdmin: true }, userId, cmd);
  console.log(
    `${replayed ? 'Already credited' : 'Credited'} $${credit.amountUsd} to ${cmd.email} (wallet ${credit.address}); ` +
      `balance after: $${credit.balanceAfter}; request id ${cmd.requestId}`,
  );
  return 0;
}

async function main(): Promise<number> {
  const cmd = parse(process.argv.slice(2));
  if (!cmd) {
    console.error(USAGE);
    return 2;
  }
  const config = loadConfig();
  let url = config.DATABASE_URL;
  let embedded: EmbeddedServer | undefined;
  if (!url) {
    const password = storedSecret(config.DATA_DIR, 'embeddedDbPassword', () => {
      throw new ConfigError(`No platform data in ${config.DATA_DIR}: start the platform once (npm start), or set DATA_DIR/DATABASE_URL`);
    });
    const running = runningPort(embeddedClusterDir(config.DATA_DIR));
    if (running) url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${running}/platform`;
    else {
      embedded = await startEmbeddedPostgres({ dataDir: config.DATA_DIR, password });
      url = embedded.url;
    }
  }
  try {
    await migrate(url);
    const db = createDb(url, { poolSize: 1, applicationName: 'agent-platform-admin' });
    try {
      const ledger = createLedgerService({ db });
      // the platform's own wallet key (environment, else DATA_DIR): a wallet a credit creates here opens there
      const encryptionKey = resolveSecrets(config).walletEncryptionKey;
      const wallets = createSessionWalletService({ db, config, encryptionKey, ledger });
      const resetLinks = createAdminResetLinks({ db, publicUrl: config.PUBLIC_URL });
      return await run(createAdminService({ db, publicUrl: config.PUBLIC_URL, wallets, ledger, resetLinks }), cmd);
    } finally {
      await db.close();
    }
  } finally {
    await embedded?.stop();
  }
}

/** The port of a live server on that cluster (line 4 of postmaster.pid), if one runs. */
function runningPort(clusterDir: string): number | undefined {
  try {
    const lines = readFileSync(join(clusterDir, 'postmaster.pid'), 'utf8').split('\n');
    const pid = Number(lines[0]);
    process.kill(pid, 0); // throws when no such process
    return Number(lines[3]) || undefined;
  } catch {
    return undefined;
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    const known = err instanceof ConfigError || err instanceof EmbeddedPostgresError || (isAppError(err) && err.status < 500);
    console.error(known ? err.message : err);
    process.exit(1);
  },
);
