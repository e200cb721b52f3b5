/**
 * The x402 gateway proxy (§4.11): health, colony join, fitness, pricing, the paid endpoints and
 * payments, passed through to the gateway at X402_GATEWAY_URL (./x402.client.ts). Every `pay`
 * attempt of a signed-in user, accepted or refused, is written to the append-only audit
 * (migration 180) before the answer is sent. A `pay` is charged to the user: its amount is
 * debited from their wallet balance through the ledger before the gateway is called (within a
 * daily cap per user) and given back when the call fails (./x402.charge.ts).
 *
 * Validation lives here rather than in the route schema because a refused payment must still be
 * audited, and because §4.11 fixes the texts and their order. An action names one of the caller's
 * own agents: any other id (someone else's, or none) is 404 `Agent not found`, after the field
 * rules and before the gateway is called or anything is charged, so a tenant can neither join
 * another's agent to a colony with a wallet of their choosing nor read its fitness or pricing.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import { agentsRepo } from '../agents/index.ts';
import type { X402Gateway, X402Result } from './x402.client.ts';
import { type X402AuditRow, x402Repo } from './x402.repo.ts';
import type { X402Charges } from './x402-charge.service.ts';

export const X402_ACTIONS = ['join-colony', 'fitness', 'pricing', 'endpoints', 'pay'] as const;
export type X402Action = (typeof X402_ACTIONS)[number];
/** §8 "x402 pay amount: greater than 0, at most 100" (US dollars). */
export const X402_MAX_AMOUNT = 100;

/** §4.11 error texts, exactly. */
export const X402_ERRORS = {
  agentIdRequired: 'agentId required',
  // ours: the agent is not one of the caller's (§4.11 shows no text for it)
  agentNotFound: 'Agent not found',
  invalidAmount: 'Invalid amount',
  amountTooHigh: 'Amount exceeds $100 limit. Contact support for higher limits.',
  recipientRequired: 'Recipient required',
  invalidRecipient: 'Invalid recipient address',
  invalidAction: 'Invalid action. Use: join-colony, fitness, pricing, endpoints, or pay',
  authRequired: 'Authentication required',
  gatewayError: 'x402 gateway error',
  colonyUnreachable: 'Colony gateway unreachable',
  // ours (§4.11 shows no text for these)
  notConfigured: 'x402 gateway not configured',
  walletRequired: 'walletAddress required',
  invalidWallet: 'Invalid wallet address',
  invalidCurrency: 'Invalid currency',
  invalidEndpoint: 'Invalid endpoint',
  invalidMethod: 'Invalid method',
} as const;

/** §4.11: an EVM address is 0x plus exactly 40 hex digits (no checksum rule); */
const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
/** a Solana address is Base58 (no 0, O, I, l), 32 to 44 characters. */
const SOLANA_ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;
export const isX402Address = (v: string) => EVM_ADDRESS.test(v) || SOLANA_ADDRESS.test(v);
const SLUG = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const TOKEN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

export type X402User = { id: string; email: string };
export type X402Body = Record<string, unknown>;

/** The body's action (400 `Invalid action…` for anything else): checked before whether a session is needed (§4.11's order). */
export function x402Action(body: X402Body): X402Action {
  const action = body.action;
  if (typeof action !== 'string' || !(X402_ACTIONS as readonly string[]).includes(action)) throw badRequest(X402_ERRORS.invalidAction);
  return action as X402Action;
}

export function createX402Service(deps: { db: Db; gateway: X402Gateway | undefined; charges: X402Charges }) {
  const { db, charges } = deps;
  const gatewayOrThrow = () => {
    if (!deps.gateway) throw new AppError('X402_NOT_CONFIGURED', X402_ERRORS.notConfigured);
    return deps.gateway;
  };
  const gatewayError = () => new AppError('X402_GATEWAY_ERROR', X402_ERRORS.gatewayError);
  const bodyOf = (r: X402Result) => {
    if (!r.ok) throw gatewayError();
    return r.body;
  };
  const audit = (user: X402User, row: Omit<X402AuditRow, 'userId' | 'userEmail'>) =>
    db.withUser(user.id, (trx) => x402Repo.insertAudit(trx, { ...row, userId: user.id, userEmail: user.email }));

  function agentIdOf(body: X402Body): string {
    const v = body.agentId;
    if (typeof v !== 'string' || v.trim() === '' || v.length > 200) throw badRequest(X402_ERRORS.agentIdRequired);
    return v.trim();
  }

  /** Whether `agentId` is one of the user's agents: read under their row-level security. */
  const ownsAgent = async (user: X402User, agentId: string) =>
    (await db.withUser(user.id, (trx) => agentsRepo.findAgent(trx, agentId))) !== undefined;
  const agentNotFound = () => notFound(X402_ERRORS.agentNotFound);
  const requireOwnAgent = async (user: X402User, agentId: string) => {
    if (!(await ownsAgent(user, agentId))) throw agentNotFound();
  };

  async function joinColony(user: X402User, body: X402Body) {
    const agentId = agentIdOf(body);
    const wallet = body.walletAddress;
    if (wallet === undefined || wallet === null || wallet === '') throw badRequest(X402_ERRORS.walletRequired);
    if (typeof wallet !== 'string' || !isX402Address(wallet)) throw badRequest(X402_ERRORS.invalidWallet);
    await requireOwnAgent(user, agentId);
    const r = await gatewayOrThrow().joinColony({ agentId, walletAddress: wallet });
    if (r.ok) return r.body;
    // §4.11: 402 `Colony join failed: 402 ...`; 502 `Colony join failed: <status> ...`; 503 `Colony gateway unreachable`
    if (r.reason === 'timeout' || r.reason === 'unreachable') throw new AppError('X402_COLONY_UNREACHABLE', X402_ERRORS.colonyUnreachable);
    const status = 'status' in r ? r.status : 502;
    const detail = r.reason === 'bad_status' ? r.text.replace(/\s+/g, ' ').trim() : 'invalid response';
    const message = `Colony join failed: ${status} ${detail}`.trim();
    throw new AppError('X402_COLONY_JOIN_FAILED', message, undefined, status === 402 ? 402 : 502);
  }

  /** `pay`: validate (each refusal audited), audit the attempt, call the gateway, audit its outcome. */
  async function pay(user: X402User, body: X402Body) {
    const raw = {
      agentId: typeof body.agentId === 'string' ? body.agentId : null,
      amount: typeof body.amount === 'number' && Number.isFinite(body.amount) ? body.amount : null,
      currency: body.currency === undefined ? 'USDC' : typeof body.currency === 'string' ? body.currency : null,
      recipient: typeof body.recipient === 'string' ? body.recipient : null,
      endpoint: typeof body.endpoint === 'string' ? body.endpoint : null,
      method: body.method === undefined ? 'default' : typeof body.method === 'string' ? body.method : null,
    };
    const attemptId = randomUUID();
    const refuse = async (error: string, answer: AppError = badRequest(error)) => {
      await audit(user, { attemptId, ...raw, outcome: 'refused', error });
      return answer;
    };
    let agentId: string;
    try {
      agentId = agentIdOf(body);
    } catch {
      throw await refuse(X402_ERRORS.agentIdRequired);
    }
    const amount = raw.amount;
    // amounts are whole micro-dollars (USDC has 6 decimals): 0.0000001 is not a payable amount
    if (amount === null || amount <= 0 || Number(amount.toFixed(6)) !== amount) throw await refuse(X402_ERRORS.invalidAmount);
    if (amount > X402_MAX_AMOUNT) throw await refuse(X402_ERRORS.amountTooHigh);
    if (raw.currency === null || !TOKEN.test(raw.currency)) throw await refuse(X402_ERRORS.invalidCurrency);
    if (body.recipient === undefined || body.recipient === null || body.recipient === '') throw await refuse(X402_ERRORS.recipientRequired);
    if (raw.recipient === null || !isX402Address(raw.recipient)) throw await refuse(X402_ERRORS.invalidRecipient);
    if (body.endpoint !== undefined && (raw.endpoint === null || !SLUG.test(raw.endpoint))) throw await refuse(X402_ERRORS.invalidEndpoint);
    if (raw.method === null || !TOKEN.test(raw.method)) throw await refuse(X402_ERRORS.invalidMethod);
    if (!(await ownsAgent(user, agentId))) throw await refuse(X402_ERRORS.agentNotFound, agentNotFound());

    const input = {
      agentId,
      amount,
      currency: raw.currency,
      recipient: raw.recipient,
      method: raw.method,
      endpoint: raw.endpoint ?? undefined,
    };
    const row = { attemptId, ...raw, agentId };
    if (!deps.gateway) {
      await audit(user, { ...row, outcome: 'failed', error: X402_ERRORS.notConfigured });
      throw new AppError('X402_NOT_CONFIGURED', X402_ERRORS.notConfigured);
    }
    // the user pays: debited before the call (so parallel calls cannot spend more than the balance
    // or the daily cap), refused with the audit row saying why, given back below when the call fails
    const charge = await charges.charge(user.id, { attemptId, amount });
    if (!charge.ok) {
      await audit(user, { ...row, outcome: 'refused', error: charge.reason });
      throw charge.error;
    }
    try {
      // written before the call: whatever happens next, the attempt is on record
      await audit(user, { ...row, outcome: 'attempted' });
    } catch (err) {
      await charges.refund(charge);
      throw err;
    }
    const r = await deps.gateway.pay(input);
    if (r.ok) {
      await audit(user, { ...row, outcome: 'accepted', upstreamStatus: r.status, x402Paid: r.paid });
      return r.body;
    }
    const upstreamStatus = 'status' in r ? r.status : null;
    const signed = r.paid === true;
    // a failed call is given back, unless the platform signed an x402 payment for it: that USDC
    // may have left the payer's account, so the charge stands and the audit row shows x402_paid
    if (!signed) await charges.refund(charge);
    if (r.reason === 'payment_failed') {
      await audit(user, { ...row, outcome: 'failed', error: r.message, x402Paid: signed });
      throw new AppError('X402_PAYMENT_FAILED', `x402 payment failed: ${r.message}`);
    }
    await audit(user, { ...row, outcome: 'failed', error: `gateway ${r.reason}`, upstreamStatus, x402Paid: signed });
    throw gatewayError();
  }

  return {
    configured: deps.gateway !== undefined,

    /** GET /api/x402: the gateway's health fields plus `gateway` and `status`; 503 when it does not answer. */
    async health(): Promise<Record<string, unknown> & { gateway: string; status: string }> {
      if (!deps.gateway) throw new AppError('X402_NOT_CONFIGURED', X402_ERRORS.notConfigured, { gateway: null, status: 'unconfigured' });
      const r = await deps.gateway.health();
      const gateway = deps.gateway.url;
      if (r.ok && r.body !== null && typeof r.body === 'object' && !Array.isArray(r.body)) {
        const fields = r.body as Record<string, unknown>;
        return { ...fields, gateway, status: typeof fields.status === 'string' ? fields.status : 'ok' };
      }
      const error = r.ok
        ? 'Gateway health is not a JSON object'
        : r.reason === 'timeout'
          ? 'Gateway did not answer in time'
          : r.reason === 'unreachable'
            ? 'Gateway unreachable'
            : 'status' in r
              ? `Gateway answered ${r.status}`
              : 'Gateway error';
      throw new AppError('X402_GATEWAY_UNREACHABLE', error, { gateway, status: 'unreachable' });
    },

    /** POST /api/x402 `endpoints`: the paid endpoints, for anyone. */
    async endpoints(): Promise<unknown> {
      return bodyOf(await gatewayOrThrow().endpoints());
    },

    /** POST /api/x402, every other action (x402Action), for a signed-in user (the route answers 401 without one). */
    async act(user: X402User, action: Exclude<X402Action, 'endpoints'>, body: X402Body): Promise<unknown> {
      switch (action) {
        case 'join-colony':
          return joinColony(user, body);
        case 'fitness': {
          const agentId = agentIdOf(body); // 400 and 404 before 503: the caller's to fix first
          await requireOwnAgent(user, agentId);
          return bodyOf(await gatewayOrThrow().fitness(agentId));
        }
        case 'pricing': {
          const agentId = agentIdOf(body);
          await requireOwnAgent(user, agentId);
          return bodyOf(await gatewayOrThrow().pricing(agentId));
        }
        case 'pay':
          return pay(user, body);
      }
    },

    /** The user's own audit rows, newest first (tests, and what a future history view would read). */
    auditOf: (userId: string, limit = 100) => db.withUser(userId, (trx) => x402Repo.listOwn(trx, limit)),
  };
}

export type X402Service = ReturnType<typeof createX402Service>;
