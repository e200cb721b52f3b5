/**
 * What the agent page's chat sends to the model: the conversation as it was said (the stored
 * history is in order, question before answer, docs/agents.md "Who stores turns"), shaped as chat
 * models expect it — it starts with a question and the roles alternate. A question whose answer
 * failed or never came is joined to the next question, not sent as two questions in a row.
 */
/** One message on screen; `at` is when it was said (ISO 8601: the stored timestamp, or now for a new one). */
export type ChatLine = { id: string; sender: 'user' | 'agent'; content: string; at?: string; failed?: boolean };
export type ModelMessage = { role: 'user' | 'assistant'; content: string };

/** The last `max` messages of `lines` for the model (failed and empty lines left out). */
export function modelMessages(lines: readonly ChatLine[], max = 20): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const l of lines) {
    if (l.failed || !l.content) continue;
    const role = l.sender === 'user' ? 'user' : 'assistant';
    const prev = out.at(-1);
    if (prev?.role === role) prev.content += `\n\n${l.content}`;
    else out.push({ role, content: l.content });
  }
  const recent = out.slice(-max);
  return recent[0]?.role === 'assistant' ? recent.slice(1) : recent;
}
