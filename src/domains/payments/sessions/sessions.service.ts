/**
 * Payment sessions (§4.8 session billing, §4.18 POST /api/wallet/sessions, docs/payments.md):
 * a deposit moved from a wallet's ledger balance into a session whose id is a bearer secret,
 * debited by the gateway per call with a signed receipt, closed or expired back to the wallet.
 */
import { randomBytes } from 'node:crypto';
import type { Hex } from 'viem';
import type { Db } from '../../../db/client.ts';
import { isCheckViolation, isUniqueViolation } from '../../../db/errors.ts';
import { sha256 } from '../../../lib/crypto.ts';
import { AppError, badRequest, forbidden, unauthorized } from '../../../lib/errors.ts';
import { isMicros, microsToUsd, normalizeAddress, usdToMicros } from '../../../lib/money.ts';
import { createLedgerService, type LedgerService } from '../ledger/ledger.service.ts';
import { paymentDomain, type ReceiptSigner, recoverOpenSessionSigner, sessionRef } from './receipts.rules.ts';
import { type SessionRow, sessionsRepo } from './sessions.repo.ts';

/** Prefix of payment session ids: recognisable in logs and secret scanners. */
export const SESSION_ID_PREFIX = 'ps_';
/** Receipts listed per request: the latest ones (each is also in its gateway response). */
export const RECEIPTS_LIMIT = 1000;
/** How far ahead an OpenSession signature's deadline may lie (it is single use regardless). */
const MAX_SIGNATURE_WINDOW_S = 3600;

export type OpenInput = {
  address: unknown;
  deposit: unknown;
  /** the signed-in user (cookie), when any */
  userId?: string | null | undefined;
  /** EIP-712 OpenSession authorisation by `address` (docs/payments.md) */
  signature?: unknown;
  deadline?: unknown;
  salt?: unknown;
  /** with a signature: SHA-256 of the session id the signer chose (the id itself is never sent) */
  sessionKeyHash?: unknown;
};

/** A refusal names its catalogue entry (src/lib/error-codes.ts): the gateway answers with it as is. */
export type DebitOutcome =
  | { ok: true; debitId: number; receipt: string; nonce: string; signature: Hex; remainingMicros: number; sessionRef: Hex }
  | { ok: false; code: 'SESSION_INVALID' }
  | { ok: false; code: 'INSUFFICIENT_BALANCE'; remainingMicros: number; costMicros: number }
  | { ok: false; code: 'VOUCHER_FAILED' };

export function sessionView(s: SessionRow, sessionId?: string) {
  return {
    ...(sessionId ? { sessionId } : {}),
    address: s.address,
    status: s.status === 'active' && !s.usable ? ('expired' as const) : s.status,
    deposit: microsToUsd(s.deposit_micros),
    remaining: microsToUsd(s.remaining_micros),
    debits: s.debit_count,
    expiresAt: s.expires_at.toISOString(),
    createdAt: s.created_at.toISOString(),
    endedAt: s.ended_at ? s.ended_at.toISOString() : null,
  };
}

export function createPaymentSessionsService(deps: {
  db: Db;
  signer: ReceiptSigner;
  chainId: number;
  ttlMs: number;
  now?: () => Date;
  /** wallet balances are read through the ledger (the platform passes its own; one over `db` otherwise) */
  ledger?: Pick<LedgerService, 'balance'>;
}) {
  const { db, signer } = deps;
  const ledger = deps.ledger ?? createLedgerService({ db });
  const k = db.kysely;
  const now = deps.now ?? (() => new Date());
  const hashOf = (sessionId: string) => sha256(sessionId);
  const wellFormed = (sessionId: unknown): sessionId is string =>
    typeof sessionId === 'string' && sessionId.startsWith(SESSION_ID_PREFIX) && sessionId.length === SESSION_ID_PREFIX.length + 43;

  /**
   * Proof that the caller controls `address` (docs/payments.md "Payment sessions"): a signed
   * authorisation gives the salt (single use) and the hash of the session id the signer chose.
   */
  async function checkProof(
    address: string,
    depositMicros: number,
    input: OpenInput,
  ): Promise<{ openSalt: string; tokenHash: Buffer } | null> {
    if (input.signature !== undefined) {
      const sig = input.signature;
      const deadline = input.deadline;
      const salt = input.salt;
      const keyHash = input.sessionKeyHash;
      if (typeof sig !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(sig)) throw badRequest('Invalid signature');
      if (typeof deadline !== 'number' || !Number.isSafeInteger(deadline)) throw badRequest('Invalid deadline');
      if (typeof salt !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(salt)) throw badRequest('Invalid salt');
      if (typeof keyHash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(keyHash))
        throw badRequest('Invalid sessionKeyHash: the SHA-256 of the session id you chose, 0x + 64 hex');
      const nowS = Math.floor(now().getTime() / 1000);
      if (deadline <= nowS || deadline > nowS + MAX_SIGNATURE_WINDOW_S) throw badRequest('Signature deadline expired or too far ahead');
      const signer = await recoverOpenSessionSigner(
        paymentDomain(deps.chainId, await deps.signer.address()),
        { wallet: address as Hex, depositMicros, deadline, salt: salt as Hex, sessionKeyHash: keyHash as Hex },
        sig as Hex,
      );
      // a signature for another deployment (another verifyingContract) recovers another address
      if (signer !== address) throw forbidden('Signature is not by this address');
      return { openSalt: salt.toLowerCase(), tokenHash: Buffer.from(keyHash.slice(2), 'hex') };
    }
    if (!input.userId) throw unauthorized('Sign in or sign the session with the wallet');
    const own = await db.withUser(input.userId, (trx) => sessionsRepo.userAddresses(trx, input.userId!));
    if (!own.includes(address)) throw forbidden('Address is not your wallet');
    return null;
  }

  return {
    /**
     * POST /api/wallet/sessions. A signed-in opener gets the new bearer id (`sessionId`); a signed
     * authorisation opens the session under the id its signer chose and answers without one, so
     * whoever relays the signature cannot use the session.
     */
    async open(input: OpenInput) {
      const address = normalizeAddress(input.address);
      if (!address) throw badRequest('Invalid address');
      const depositMicros = usdToMicros(input.deposit);
      if (depositMicros === undefined || !isMicros(depositMicros)) throw badRequest('Invalid deposit');
      const signed = await checkProof(address, depositMicros, input);
      const sessionId = signed ? undefined : SESSION_ID_PREFIX + randomBytes(32).toString('base64url');
      const tokenHash = signed ? signed.tokenHash : hashOf(sessionId!);
      try {
        await k.transaction().execute((trx) =>
          sessionsRepo.open(trx, {
            tokenHash,
            address,
            userId: input.userId ?? null,
            depositMicros,
            ttlMs: deps.ttlMs,
            openSalt: signed?.openSalt ?? null,
          }),
        );
      } catch (err) {
        if (isCheckViolation(err)) {
          throw new AppError('INSUFFICIENT_BALANCE', undefined, {
            balance: microsToUsd(await ledger.balance(address)),
            deposit: microsToUsd(depositMicros),
          });
        }
        // the same salt, or a session id already in use (its signer opened it already)
        if (isUniqueViolation(err)) throw badRequest('Signature already used');
        throw err;
      }
      const s = await sessionsRepo.byToken(k, tokenHash);
      return sessionView(s!, sessionId);
    },

    /** The session a bearer id names; undefined for an unknown or malformed id. */
    async get(sessionId: unknown) {
      if (!wellFormed(sessionId)) return undefined;
      const s = await sessionsRepo.byToken(k, hashOf(sessionId));
      return s ? sessionView(s) : undefined;
    },

    /** Receipts of a session's debits (the bearer id proves access). */
    async receipts(sessionId: unknown) {
      if (!wellFormed(sessionId)) return undefined;
      const s = await sessionsRepo.byToken(k, hashOf(sessionId));
      if (!s) return undefined;
      const rows = await sessionsRepo.debits(k, s.id, RECEIPTS_LIMIT);
      return rows.map((r) => ({
        receipt: `session:${sessionId}:${r.nonce}`,
        nonce: r.nonce!,
        plugin: r.plugin ?? '',
        amount: microsToUsd(-r.session_delta),
        remaining: microsToUsd(r.remaining_after ?? 0),
        signature: r.signature!,
        createdAt: r.created_at.toISOString(),
      }));
    },

    /** Closes the session; its remainder returns to the wallet's balance. */
    async close(sessionId: unknown) {
      if (!wellFormed(sessionId)) return undefined;
      const closed = await sessionsRepo.close(k, hashOf(sessionId));
      const s = await sessionsRepo.byToken(k, hashOf(sessionId));
      if (!s) return undefined;
      return { ...sessionView(s), returned: microsToUsd(closed?.returned ?? 0) };
    },

    /**
     * One gateway debit (§4.8): a random nonce, the platform's EIP-712 receipt over it, then one
     * conditional INSERT … SELECT … FOR UPDATE (sessions.repo.ts). Failures are values.
     */
    async debit(sessionId: string, walletAddress: string, costMicros: number, plugin: string): Promise<DebitOutcome> {
      const address = normalizeAddress(walletAddress);
      if (!wellFormed(sessionId) || !address) return { ok: false, code: 'SESSION_INVALID' };
      const tokenHash = hashOf(sessionId);
      const nonce = randomBytes(16).toString('hex');
      let signature: Hex;
      try {
        signature = await signer.sign({ sessionId, nonce, amountMicros: costMicros, plugin });
      } catch {
        return { ok: false, code: 'VOUCHER_FAILED' };
      }
      let row: Awaited<ReturnType<typeof sessionsRepo.debit>>;
      try {
        row = await sessionsRepo.debit(k, { tokenHash, address, costMicros, nonce, plugin, signature });
      } catch {
        return { ok: false, code: 'VOUCHER_FAILED' };
      }
      if (row) {
        return {
          ok: true,
          debitId: row.id,
          receipt: `session:${sessionId}:${nonce}`,
          nonce,
          signature,
          remainingMicros: row.remaining_after,
          sessionRef: await sessionRef(sessionId),
        };
      }
      // nothing debited: find out why (the failure path only)
      const s = await sessionsRepo.byToken(k, tokenHash);
      if (!s || s.address !== address || !s.usable) return { ok: false, code: 'SESSION_INVALID' };
      return { ok: false, code: 'INSUFFICIENT_BALANCE', remainingMicros: s.remaining_micros, costMicros };
    },

    /** Gives a debit back (its plugin call failed); once per debit. */
    refund: (debitId: number) => sessionsRepo.refund(k, debitId),

    /** The expiry job: ends every active session past its expiry, in batches; returns how many. */
    async expireDue(batch = 500): Promise<number> {
      let total = 0;
      for (;;) {
        const n = await sessionsRepo.expireDue(k, batch);
        total += n;
        if (n < batch) return total;
      }
    },

    signerInfo: async () => ({ address: await signer.address(), domain: await signer.domain() }),
  };
}

export type PaymentSessionsService = ReturnType<typeof createPaymentSessionsService>;
