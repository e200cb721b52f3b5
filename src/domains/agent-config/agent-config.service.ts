/**
 * Per-user agent configuration with versioned backups (§2 "Agent configuration and backup",
 * §4.2). A save backs up the configuration it replaces; a restore backs up the current one
 * first. Each runs in one transaction holding the per-user configuration lock, so concurrent
 * saves are applied one after another: the last to commit is the configuration, its
 * predecessors are the backups, and never more than LIMITS.configBackupsKept are kept.
 */
import { LIMITS } from '../../config/limits.ts';
import type { Db, Tx } from '../../db/client.ts';
import { isUnstorableJson } from '../../db/errors.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import { checkSerializable, type JsonObject } from '../../lib/storable-json.ts';
import { maskChannelSecrets, sealChannelSecrets } from '../agents/index.ts';
import { configRepo } from './agent-config.repo.ts';

export type ConfigActor = { id: string; isAdmin?: boolean };
export type BackupSummary = { id: string; timestamp: string };

export const INITIAL_BACKUP_ID = 'bkp_initial';

/**
 * Channel keys of the default configuration. §2 names them only `<messaging_a|b|c>`; we use the
 * channel keys the agent runtime reads (`whatsapp` takes an allow-list, `telegram` and `discord`
 * an enabled flag), plus the built-in `webchat`.
 */
export const DEFAULT_CHANNELS = { allowList: 'whatsapp', optional: ['telegram', 'discord'] } as const;

/** Model and workspace of the default configuration (§2 leaves the values to us). */
export const DEFAULT_MODEL = 'anthropic/claude-opus-4-6';
export const DEFAULT_WORKSPACE = '/home/node/workspace';
export const DEFAULT_RESET_TRIGGERS = ['/new', '/reset'] as const;

/**
 * The default configuration of §2 for a plan: `tools.profile` is `coding` for collective and
 * above and `messaging` for solo; admins get network-level access (§2 Plans), hence `coding`.
 */
export function defaultConfig(plan: string | undefined, isAdmin = false): JsonObject {
  const coding = isAdmin || (plan !== undefined && plan !== 'solo');
  return {
    logging: { level: 'info' },
    agents: { defaults: { model: DEFAULT_MODEL, workspace: DEFAULT_WORKSPACE } },
    tools: { profile: coding ? 'coding' : 'messaging' },
    gateway: { bind: 'lan', auth: { mode: 'token' } },
    channels: {
      [DEFAULT_CHANNELS.allowList]: { allowFrom: [] },
      [DEFAULT_CHANNELS.optional[0]]: { enabled: false },
      [DEFAULT_CHANNELS.optional[1]]: { enabled: false },
      webchat: { enabled: true },
    },
    session: { dmScope: 'per-channel-peer', resetTriggers: [...DEFAULT_RESET_TRIGGERS] },
    skills: { install: { nodeManager: 'npm' } },
  };
}

/**
 * `secretsKey` (SECRETS_ENCRYPTION_KEY): channel secrets in the configuration (bot tokens…) are
 * sealed at rest, in the configuration and in its backups, and masked in every answer, exactly as
 * in an agent's own configuration (../agents/channel-secrets.ts, docs/security.md).
 */
export type ConfigDeps = { db: Db; now?: () => Date; secretsKey?: Buffer };

export function createConfigService(deps: ConfigDeps) {
  const { db } = deps;
  const now = deps.now ?? (() => new Date());
  const key = deps.secretsKey;
  const seal = (incoming: JsonObject, stored: JsonObject | null): JsonObject =>
    key ? (sealChannelSecrets(incoming, stored ?? undefined, key) as JsonObject) : incoming;
  const mask = (config: JsonObject): JsonObject => maskChannelSecrets(config, key) as JsonObject;

  const summaries = (rows: { id: string; created_at: Date }[]): BackupSummary[] =>
    rows.map((r) => ({ id: r.id, timestamp: r.created_at.toISOString() }));

  /**
   * Inside the locked transaction: stores `previous` as a new backup and prunes to the limit.
   * The first backup of a user who never saved is `bkp_initial`; later ones `bkp_<epoch_ms>`,
   * bumped past the last id handed out so two saves in one millisecond still differ.
   */
  async function backUp(trx: Tx, userId: string, locked: { config: JsonObject | null; last_backup_ms: number }, previous: JsonObject) {
    const t = now();
    let id: string;
    let lastMs = locked.last_backup_ms;
    let createdAt = t;
    if (locked.config === null) {
      id = INITIAL_BACKUP_ID;
    } else {
      const ms = Math.max(t.getTime(), lastMs + 1);
      lastMs = ms;
      id = `bkp_${ms}`;
      createdAt = new Date(ms);
    }
    await configRepo.insertBackup(trx, userId, { id, config: previous, createdAt });
    await configRepo.pruneBackups(trx, userId, LIMITS.configBackupsKept);
    return { id, lastMs };
  }

  async function run<T>(userId: string, fn: (trx: Tx) => Promise<T>): Promise<T> {
    try {
      return await db.withUser(userId, fn);
    } catch (err) {
      // a last line of defence behind checkSerializable
      if (isUnstorableJson(err)) throw badRequest('Config is not serializable');
      throw err;
    }
  }

  return {
    /** §4.2 GET /api/config: the saved configuration, or the plan's default when none is saved. */
    async get(actor: ConfigActor) {
      return db.withUser(actor.id, async (trx) => {
        const row = await configRepo.findConfig(trx, actor.id);
        const config = row?.config ?? defaultConfig(await configRepo.userPlan(trx, actor.id), actor.isAdmin);
        return { config: mask(config), backups: summaries(await configRepo.listBackups(trx, actor.id)) };
      });
    },

    /** §4.2 POST /api/config: backs up the previous configuration, then saves `config`. */
    async save(actor: ConfigActor, input: JsonObject) {
      const checked = checkSerializable(input, LIMITS.configMaxDepth);
      return run(actor.id, async (trx) => {
        const locked = await configRepo.lockConfig(trx, actor.id);
        const previous = locked.config ?? defaultConfig(await configRepo.userPlan(trx, actor.id), actor.isAdmin);
        // a masked secret sent back keeps the stored one; a new one is sealed before it is stored
        const config = seal(checked, locked.config);
        const backup = await backUp(trx, actor.id, locked, previous);
        await configRepo.saveConfig(trx, actor.id, config, backup.lastMs);
        return {
          success: true as const,
          config: mask(config),
          backupId: backup.id,
          backups: summaries(await configRepo.listBackups(trx, actor.id)),
        };
      });
    },

    /** §4.2 PUT /api/config: backs up the current configuration, then restores `backupId`. */
    async restore(actor: ConfigActor, backupId: string) {
      return run(actor.id, async (trx) => {
        const locked = await configRepo.lockConfig(trx, actor.id);
        const target = await configRepo.findBackup(trx, actor.id, backupId);
        if (!target) throw notFound('Backup not found');
        const current = locked.config ?? defaultConfig(await configRepo.userPlan(trx, actor.id), actor.isAdmin);
        const backup = await backUp(trx, actor.id, locked, current);
        await configRepo.saveConfig(trx, actor.id, target.config, backup.lastMs);
        return {
          success: true as const,
          config: mask(target.config),
          restoredFrom: target.id,
          backupId: backup.id,
          backups: summaries(await configRepo.listBackups(trx, actor.id)),
        };
      });
    },
  };
}

export type ConfigService = ReturnType<typeof createConfigService>;
