/**
 * The agent's persona (docs/agents.md "Persona"): the configuration's `systemPrompt` goes to the
 * model as the first system message of every call the runtime makes (chat over HTTP and
 * WebSocket, and the heartbeat), ahead of any system message the caller sent, so the owner's
 * instructions come before anything a client adds.
 */

type Message = { role: string; content: unknown };

/** The configured prompt, or undefined when it is unset, null, not a string or only whitespace. */
export function systemPromptOf(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() ? value : undefined;
}

/** `messages` with the persona first (unchanged without one). */
export function withSystemPrompt(messages: Message[], systemPrompt: string | undefined): Message[] {
  return systemPrompt ? [{ role: 'system', content: systemPrompt }, ...messages] : messages;
}
