/**
 * Channel secrets in an agent's configuration (a Telegram bot token, a Discord or Slack token…):
 * sealed at rest, masked in every answer, opened only for the agent itself (docs/security.md
 * "Secrets at rest").
 *
 * A secret is a string value, anywhere under `channels`, whose key names a credential (token,
 * secret, password, API key, signing/private key). At rest it is `{"$sealed":"v1.…"}` (AES-256-GCM
 * with SECRETS_ENCRYPTION_KEY); in answers `"••••" + its last 4 characters`. A configuration sent
 * back with a masked value keeps the stored secret, so a client can read, edit and save a
 * configuration without ever holding the secret.
 */
import { decryptSecret, encryptSecret } from '../../lib/crypto.ts';

type Json = Record<string, unknown>;

const SECRET_KEY = /(token|secret|password|passwd|apikey|api_key|signingkey|signing_key|privatekey|private_key)$/i;
export const MASK = '••••';

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isSealed = (v: unknown): v is { $sealed: string } => isObject(v) && typeof v.$sealed === 'string' && Object.keys(v).length === 1;

/** Applies `fn` to every secret under `channels` (a copy; the input is not changed). */
function mapSecrets(config: Json, fn: (value: unknown, path: string[]) => unknown): Json {
  if (!isObject(config.channels)) return config;
  const walk = (node: unknown, path: string[]): unknown => {
    if (Array.isArray(node)) return node.map((v, i) => walk(v, [...path, String(i)]));
    if (!isObject(node) || isSealed(node)) return node;
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      out[k] = SECRET_KEY.test(k) && (typeof v === 'string' || isSealed(v)) ? fn(v, [...path, k]) : walk(v, [...path, k]);
    }
    return out;
  };
  return { ...config, channels: walk(config.channels, ['channels']) };
}

const at = (config: Json | undefined, path: string[]): unknown =>
  path.reduce<unknown>((node, k) => (isObject(node) || Array.isArray(node) ? (node as Json)[k] : undefined), config);

/**
 * Seals the secrets of `incoming` for storage. A masked value (what answers show) keeps the
 * secret stored at the same place in `stored`; a masked value with nothing stored is dropped.
 */
export function sealChannelSecrets(incoming: Json, stored: Json | undefined, key: Buffer): Json {
  return mapSecrets(incoming, (value, path) => {
    if (isSealed(value)) {
      const prev = at(stored, path);
      return isSealed(prev) ? prev : undefined; // a client cannot inject a sealed blob of its own
    }
    const s = value as string;
    if (s.startsWith(MASK)) {
      const prev = at(stored, path);
      return isSealed(prev) ? prev : undefined;
    }
    return { $sealed: encryptSecret(key, s) };
  });
}

/** What answers show: `••••` and the last 4 characters of each secret. */
export function maskChannelSecrets(config: Json, key: Buffer | undefined): Json {
  return mapSecrets(config, (value) => {
    if (typeof value === 'string' && value.startsWith(MASK)) return value; // masked already
    let clear = typeof value === 'string' ? value : '';
    if (isSealed(value) && key) {
      try {
        clear = decryptSecret(key, value.$sealed);
      } catch {
        clear = '';
      }
    }
    return `${MASK}${clear.length > 8 ? clear.slice(-4) : ''}`;
  });
}

/** The configuration as the agent itself gets it (deploy): every secret in clear. */
export function openChannelSecrets(config: Json, key: Buffer): Json {
  return mapSecrets(config, (value) => {
    if (!isSealed(value)) return value;
    try {
      return decryptSecret(key, value.$sealed);
    } catch {
      return undefined;
    }
  });
}
