/**
 * Security events from the identity provider (§4.1 "Security event receivers", §6).
 *
 * Receiving and acting are split so the work after the 202 is durable: `receive` verifies the
 * token (risc-verifier.client.ts), records the event under its `jti` in risc_events in one statement and
 * returns; the worker (src/workers/security-events.ts) claims a pending event (`claimDue`: FOR
 * UPDATE SKIP LOCKED in a transaction the claim keeps open), acts on it (`act`) and records the
 * outcome in that same transaction (`finish`), which then commits. An event recorded just before
 * a crash stays pending and is acted on by whichever process polls next.
 *
 * Every action is idempotent (sessions deleted, a flag set or cleared, stored tokens dropped): a
 * process that dies after acting and before committing `done` leaves the event pending, and acting
 * on it again changes nothing more.
 */
import { createHash } from 'node:crypto';
import type { ControlledTransaction } from 'kysely';
import type { Db } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';
import { badRequest } from '../../lib/errors.ts';
import type { JobOutcome } from '../../lib/jobs.ts';
import { type Logger, silentLogger } from '../../lib/logger.ts';
import type { AccountsService } from '../accounts/index.ts';
import { type RiscEventRow, riscRepo } from './risc.repo.ts';
import type { RiscVerifier } from './risc-verifier.client.ts';

/** §6: `<schema_base>/risc/event-type/<name>` and `<schema_base>/oauth/event-type/tokens-revoked`. */
export const SCHEMA_BASE = 'https://schemas.openid.net/secevent';
const RISC = `${SCHEMA_BASE}/risc/event-type`;
export const RISC_EVENTS = {
  accountDisabled: `${RISC}/account-disabled`,
  accountEnabled: `${RISC}/account-enabled`,
  sessionsRevoked: `${RISC}/sessions-revoked`,
  tokensRevoked: `${SCHEMA_BASE}/oauth/event-type/tokens-revoked`,
  credentialChangeRequired: `${RISC}/account-credential-change-required`,
  verification: `${RISC}/verification`,
} as const;

/** §4.1 GET /api/security/risc `events_supported`, in the specification's order and words. */
export const EVENTS_SUPPORTED = [
  'account-disabled',
  'account-enabled',
  'sessions-revoked',
  'tokens-revoked',
  'account-credential-change-required',
  'verification',
] as const;

/** §6 legacy receiver: these revoke every session; account-enabled does nothing; others are ignored. */
export const LEGACY_REVOKING_EVENTS = ['account-compromised', 'account-disabled', 'sessions-revoked', 'identifier-changed'] as const;

export type SecurityEventsDeps = {
  db: Db;
  verifier: RiscVerifier;
  /** ends every session of a user in every app instance (the session cache's eviction bus) */
  accounts: Pick<AccountsService, 'revokeAllSessions'>;
  logger?: Logger;
  /** an event was recorded: the worker of this process may look at once */
  onRecorded?: () => void;
};

type Outcome = { event: string; userIds: string[]; action: string };

/** A pending event the worker claimed: its row is locked by a transaction the service holds until `finish`. */
export type ClaimedSecurityEvent = Readonly<RiscEventRow>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
/** `https://…/event-type/account-disabled` or a bare `account-disabled` → `account-disabled` */
const eventName = (type: string) => type.slice(type.lastIndexOf('/') + 1);

export function createSecurityEventsService(deps: SecurityEventsDeps) {
  const { db, verifier } = deps;
  const log = deps.logger ?? silentLogger;
  /** the transaction holding each claimed event's row lock, until its outcome is recorded */
  const held = new WeakMap<ClaimedSecurityEvent, ControlledTransaction<DB>>();

  async function record(e: Parameters<typeof riscRepo.record>[1]): Promise<{ duplicate: boolean }> {
    const inserted = await riscRepo.record(db.kysely, e);
    // event types and the jti only: never the token, never the subject's email
    log.info({ jti: e.jti, receiver: e.receiver, events: Object.keys(e.events), duplicate: !inserted }, 'security event received');
    if (inserted) deps.onRecorded?.();
    return { duplicate: !inserted };
  }

  /** §6 users: by subject id (the linked identity-provider account), else by email. */
  async function usersOf(data: unknown): Promise<string[]> {
    const subject = isObject(data) && isObject(data.subject) ? data.subject : {};
    const sub = str(subject.sub);
    const email = str(subject.email);
    const bySub = sub ? await riscRepo.usersBySubject(db.kysely, sub) : [];
    if (bySub.length > 0 || !email) return bySub;
    return riscRepo.usersByEmail(db.kysely, email);
  }

  const revokeSessions = async (userIds: string[]) => {
    for (const id of userIds) await deps.accounts.revokeAllSessions(id);
  };

  /** §6's event table, one event type. */
  async function actOnPrimary(type: string, data: unknown): Promise<Outcome> {
    const event = eventName(type);
    const done = (userIds: string[], action: string) => ({ event, userIds, action });
    switch (type) {
      case RISC_EVENTS.verification:
        // the provider testing the stream: its `state` is what an operator compares
        log.info({ state: isObject(data) ? str(data.state) : undefined }, 'security event stream verified');
        return done([], 'acknowledged');
      case RISC_EVENTS.accountDisabled: {
        const userIds = await usersOf(data);
        const hijacking = isObject(data) && data.reason === 'hijacking';
        // the flag first: no identity-provider sign-in may slip in between the revocation and it
        if (hijacking) for (const id of userIds) await riscRepo.disableIdpSignIn(db.kysely, id);
        await revokeSessions(userIds);
        return done(userIds, hijacking ? 'idp sign-in disabled, sessions revoked' : 'sessions revoked');
      }
      case RISC_EVENTS.accountEnabled: {
        const userIds = await usersOf(data);
        for (const id of userIds) await riscRepo.enableIdpSignIn(db.kysely, id);
        return done(userIds, 'idp sign-in enabled');
      }
      case RISC_EVENTS.sessionsRevoked: {
        const userIds = await usersOf(data);
        await revokeSessions(userIds);
        return done(userIds, 'sessions revoked');
      }
      case RISC_EVENTS.tokensRevoked: {
        const userIds = await usersOf(data);
        for (const id of userIds) await riscRepo.dropIdpRefreshTokens(db.kysely, id);
        await revokeSessions(userIds);
        return done(userIds, 'refresh tokens dropped, sessions revoked');
      }
      case RISC_EVENTS.credentialChangeRequired: {
        const userIds = await usersOf(data);
        log.warn({ userIds }, 'identity provider requires a credential change');
        return done(userIds, 'logged');
      }
      default:
        log.info({ event: type }, 'security event type not acted on');
        return done([], 'ignored');
    }
  }

  /** §6 legacy receiver: users by the token's `sub` (an email). */
  async function actOnLegacy(type: string, email: string | null): Promise<Outcome> {
    const event = eventName(type);
    if (!(LEGACY_REVOKING_EVENTS as readonly string[]).includes(event)) {
      return { event, userIds: [], action: event === 'account-enabled' ? 'nothing' : 'ignored' };
    }
    const userIds = email ? await riscRepo.usersByEmail(db.kysely, email) : [];
    await revokeSessions(userIds);
    return { event, userIds, action: 'sessions revoked' };
  }

  async function act(row: RiscEventRow): Promise<Outcome[]> {
    const outcomes: Outcome[] = [];
    for (const [type, data] of Object.entries(row.events)) {
      outcomes.push(row.receiver === 'legacy' ? await actOnLegacy(type, row.legacy_email) : await actOnPrimary(type, data));
    }
    return outcomes;
  }

  return {
    /** POST /api/security/risc: verify (§6 order), record under `jti`; nothing is acted on here. */
    async receive(token: string): Promise<{ duplicate: boolean }> {
      if (token === '') throw badRequest('Empty body: expected a security event token');
      const { payload } = await verifier.verify(token);
      const jti = str(payload.jti);
      if (!jti || jti.length > 256) throw badRequest('Invalid token: no jti');
      if (!isObject(payload.events) || Object.keys(payload.events).length === 0) throw badRequest('Invalid token: no events');
      return record({ jti, receiver: 'primary', issuer: payload.iss!, events: payload.events, legacyEmail: null });
    },

    /**
     * POST /api/auth/idp/risc (legacy): the three-part check first (400), then the same issuer
     * and RS256 signature checks as the primary receiver (an audience is checked when present):
     * an unsigned token must never end anyone's sessions. Users by `sub`, which is an email.
     */
    async receiveLegacy(token: string): Promise<{ duplicate: boolean }> {
      if (token.split('.').length !== 3) throw badRequest('Invalid token: expected three dot-separated parts');
      const { payload } = await verifier.verify(token, { requireAudience: false });
      if (!isObject(payload.events) || Object.keys(payload.events).length === 0) throw badRequest('Invalid token: no events');
      const jti = str(payload.jti) ?? `sha256:${createHash('sha256').update(token).digest('base64url')}`;
      if (jti.length > 256) throw badRequest('Invalid token: jti too long');
      return record({ jti, receiver: 'legacy', issuer: payload.iss!, events: payload.events, legacyEmail: str(payload.sub) ?? null });
    },

    /**
     * The worker's claim: the oldest due pending event, locked FOR UPDATE SKIP LOCKED (no other
     * worker takes it) by a transaction that stays open until `finish`; none when nothing is due.
     * No lease: the row lock is the claim, and it ends with the transaction (or its connection).
     */
    async claimDue(): Promise<ClaimedSecurityEvent[]> {
      const trx = await db.kysely.startTransaction().execute();
      try {
        const row = await riscRepo.takeDue(trx);
        if (!row) {
          await trx.rollback().execute();
          return [];
        }
        held.set(row, trx);
        return [row];
      } catch (err) {
        await trx.rollback().execute();
        throw err;
      }
    },

    /** Acts on a claimed event (§6's table); throws when an action fails. */
    act,

    /**
     * Records the outcome in the claim's transaction and commits it: done; pending again after a
     * backoff; failed for good after the last attempt; or, given back by a stopping worker,
     * pending as it was (nothing written).
     */
    async finish(event: ClaimedSecurityEvent, outcome: JobOutcome<Outcome[]>): Promise<boolean> {
      const trx = held.get(event);
      if (!trx) return false;
      held.delete(event);
      try {
        if (outcome.status === 'succeeded') {
          await riscRepo.markDone(trx, event.jti, outcome.result);
          log.info({ jti: event.jti, outcome: outcome.result }, 'security event processed');
        } else if (outcome.status !== 'released') {
          await riscRepo.markFailed(trx, event.jti, outcome.error, outcome.status === 'retry' ? outcome.retryInMs : null);
        }
        await trx.commit().execute();
        return true;
      } catch (err) {
        await trx.rollback().execute();
        throw err;
      }
    },
  };
}

export type SecurityEventsService = ReturnType<typeof createSecurityEventsService>;
