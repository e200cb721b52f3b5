/**
 * What a PostgreSQL error means, in one place: services branch on these predicates, never on raw
 * SQLSTATE codes. The database keeps the invariants (docs/architecture.md rule 5); a service turns
 * the refusal of one into the answer the specification names (a 409, a 402, a value).
 */

/** The SQLSTATE codes the platform tells apart (PostgreSQL manual, appendix "Error Codes"). */
const SQLSTATE = {
  uniqueViolation: '23505',
  checkViolation: '23514',
  invalidTextRepresentation: '22P02',
  characterNotInRepertoire: '22021',
  untranslatableCharacter: '22P05',
  statementTooComplex: '54001',
} as const;

const sqlState = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
};

const constraintOf = (err: unknown): string | undefined => (err as { constraint?: string } | null | undefined)?.constraint;

/** A UNIQUE constraint refused the row (of `constraint` when named): a race or a replay, turned into a 409 or a value. */
export const isUniqueViolation = (err: unknown, constraint?: string): boolean =>
  sqlState(err) === SQLSTATE.uniqueViolation && (constraint === undefined || constraintOf(err) === constraint);

/** A CHECK constraint refused the row, e.g. a balance that would go below zero (migration 020). */
export const isCheckViolation = (err: unknown): boolean => sqlState(err) === SQLSTATE.checkViolation;

/** Text PostgreSQL cannot store (a NUL byte, a character the encoding lacks): the client's input, a 400. */
export const isUnstorableText = (err: unknown): boolean => {
  const code = sqlState(err);
  return code === SQLSTATE.characterNotInRepertoire || code === SQLSTATE.untranslatableCharacter;
};

/** JSON PostgreSQL refuses to store: invalid text representation, untranslatable character, nested too deep. */
export const isUnstorableJson = (err: unknown): boolean => {
  const code = sqlState(err);
  return code === SQLSTATE.invalidTextRepresentation || code === SQLSTATE.untranslatableCharacter || code === SQLSTATE.statementTooComplex;
};

/**
 * The database cannot be reached right now: the connection was refused or cut (the server is down
 * or restarting), or the server is starting up or shutting down (SQLSTATE class 08 and 57P01-57P03).
 * Nothing the client sent is wrong and a retry may succeed: a 503, not a 500.
 */
export const isDatabaseUnavailable = (err: unknown): boolean => {
  const code = sqlState(err);
  if (code !== undefined && (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03')) return true;
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET') return true;
  // node-postgres's own messages for a connection that ended under a query (no code)
  const message = (err as { message?: unknown } | null | undefined)?.message;
  return typeof message === 'string' && /^(Connection terminated|Client has encountered a connection error)/.test(message);
};
