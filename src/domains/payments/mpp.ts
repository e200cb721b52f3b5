/**
 * MPP, the Machine Payments Protocol (§4.8; the `Payment` HTTP authentication scheme,
 * docs/payments.md "MPP"). The 402 challenge names amount, currency (token address), recipient,
 * description, a nonce and its expiry. The nonce is HMAC-signed and carries its own expiry and
 * terms, so issuing a challenge writes nothing; it is spent once, in PostgreSQL (mpp_payments:
 * UNIQUE nonce, UNIQUE transaction, UNIQUE credential).
 *
 * Credential (`Authorization: Payment <credential>`): base64url of the JSON
 * `{"challenge":{"nonce":"…"},"payload":{"type":"hash","hash":"0x<tx hash>"}}` — the payer sent
 * the token transfer themselves and proves it with the transaction hash. It pays when the
 * transaction is confirmed (MPP_CONFIRMATIONS) on TEMPO_RPC_URL, succeeded, was mined after the
 * challenge was issued, and moved at least `amount` of MPP_CURRENCY to MPP_RECIPIENT.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { Hex, PublicClient } from 'viem';
import type { DB } from '../../db/schema.ts';
import { sha256 } from '../../lib/crypto.ts';
import { viem } from '../../lib/viem.ts';
import type { MppMethod } from './gateway.service.ts';
import { microsToUsd } from './money.ts';

// event Transfer(address indexed from, address indexed to, uint256 value), as the ABI item viem's parseAbiItem makes of it
const transferEvent = {
  type: 'event',
  name: 'Transfer',
  inputs: [
    { indexed: true, name: 'from', type: 'address' },
    { indexed: true, name: 'to', type: 'address' },
    { indexed: false, name: 'value', type: 'uint256' },
  ],
} as const;

type Terms = { a: number; c: string; r: string; p: string; iat: number; exp: number; n: string };

export function createMppMethod(deps: {
  db: Kysely<DB>;
  secret: Buffer;
  recipient: string | undefined;
  currency: string;
  rpcUrl: string | undefined;
  challengeTtlMs: number;
  confirmations: number;
  now?: () => number;
  client?: PublicClient;
}): MppMethod {
  const now = deps.now ?? Date.now;
  const recipient = deps.recipient?.toLowerCase();
  const currency = deps.currency.toLowerCase();
  // built on the first verification (viem is loaded on first use: src/lib/viem.ts)
  const rpcUrl = deps.rpcUrl;
  let client: Promise<PublicClient> | undefined = deps.client ? Promise.resolve(deps.client) : undefined;
  const chainClient = (url: string) =>
    (client ??= viem().then(({ createPublicClient, http }) =>
      createPublicClient({ cacheTime: 0, transport: http(url, { timeout: 10_000, retryCount: 0 }) }),
    ));
  const mac = (payload: string) => createHmac('sha256', deps.secret).update(`mpp-challenge:${payload}`).digest('base64url');

  const issue = (t: Terms) => {
    const payload = Buffer.from(JSON.stringify(t)).toString('base64url');
    return `${payload}.${mac(payload)}`;
  };
  const open = (nonce: string): Terms | undefined => {
    const [payload, sig] = nonce.split('.');
    if (!payload || !sig || nonce.length > 512) return undefined;
    const expected = Buffer.from(mac(payload));
    const given = Buffer.from(sig);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    try {
      return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Terms;
    } catch {
      return undefined;
    }
  };

  return {
    challenge(amountMicros, plugin) {
      if (!recipient) return null;
      const iat = now();
      const expiresAt = iat + deps.challengeTtlMs;
      const nonce = issue({
        a: amountMicros,
        c: currency,
        r: recipient,
        p: plugin,
        iat,
        exp: expiresAt,
        n: randomBytes(12).toString('base64url'),
      });
      // token amounts in base units: the stablecoins have 6 decimals, 1 unit = 1 micro-USD
      const amount = String(amountMicros);
      const description = `${plugin} plugin call ($${microsToUsd(amountMicros)})`;
      return {
        mpp: { scheme: 'Payment', amount, currency, recipient, description, nonce, expiresAt },
        wwwAuthenticate: `Payment amount="${amount}", currency="${currency}", recipient="${recipient}", nonce="${nonce}", expires="${new Date(expiresAt).toISOString()}", description="${description}"`,
      };
    },

    async verify(credential, amountMicros, plugin) {
      if (!recipient || !(deps.client || rpcUrl)) return { ok: false, reason: 'MPP is not configured' };
      let parsed: { challenge?: { nonce?: unknown }; payload?: { type?: unknown; hash?: unknown }; source?: unknown };
      try {
        parsed = JSON.parse(Buffer.from(credential, 'base64url').toString('utf8'));
      } catch {
        return { ok: false, reason: 'malformed credential' };
      }
      const nonce = parsed?.challenge?.nonce;
      const hash = parsed?.payload?.hash;
      if (typeof nonce !== 'string' || typeof hash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(hash))
        return { ok: false, reason: 'malformed credential' };
      const terms = open(nonce);
      if (!terms) return { ok: false, reason: 'unknown challenge' };
      if (terms.exp <= now()) return { ok: false, reason: 'challenge expired' };
      if (terms.p !== plugin || terms.a < amountMicros || terms.r !== recipient || terms.c !== currency)
        return { ok: false, reason: 'challenge is for another call' };
      const txHash = hash.toLowerCase() as Hex;
      let payer: string | undefined;
      try {
        const client = await chainClient(rpcUrl ?? '');
        const { decodeEventLog } = await viem();
        const receipt = await client.getTransactionReceipt({ hash: txHash });
        if (receipt.status !== 'success') return { ok: false, reason: 'transaction failed' };
        const head = await client.getBlockNumber();
        if (head - receipt.blockNumber + 1n < BigInt(deps.confirmations)) return { ok: false, reason: 'transaction not confirmed yet' };
        const block = await client.getBlock({ blockNumber: receipt.blockNumber });
        // bound to the challenge: mined after it was issued (block times are whole seconds)
        if (Number(block.timestamp) * 1000 < Math.floor(terms.iat / 1000) * 1000)
          return { ok: false, reason: 'transaction predates the challenge' };
        let paid = 0n;
        for (const log of receipt.logs) {
          if (log.address.toLowerCase() !== currency) continue;
          try {
            const ev = decodeEventLog({ abi: [transferEvent], data: log.data, topics: log.topics });
            if (ev.args.to.toLowerCase() === recipient) {
              paid += ev.args.value;
              payer ??= ev.args.from.toLowerCase();
            }
          } catch {
            // not a Transfer event
          }
        }
        if (paid < BigInt(terms.a)) return { ok: false, reason: 'transfer below the amount' };
      } catch (err) {
        const msg = (err as Error).message ?? '';
        if (/could not be found|not found/i.test(msg)) return { ok: false, reason: 'transaction not found' };
        return { ok: false, reason: 'chain unavailable' };
      }
      // spent once: the nonce, the transaction and the credential are each UNIQUE
      const r = await sql<{ id: number }>`
        INSERT INTO mpp_payments (challenge_nonce, tx_hash, credential_hash, payer, amount_micros, plugin)
        VALUES (${nonce}, ${txHash}, ${sha256(credential)}, ${payer ?? null}, ${terms.a}, ${plugin})
        ON CONFLICT DO NOTHING RETURNING id`.execute(deps.db);
      if (!r.rows[0]) return { ok: false, reason: 'credential or transaction already used' };
      return { ok: true, txHash };
    },
  };
}
