/**
 * Chat with an agent (§4.8 gateway chat, §4.18 REST chat) and the turns stored from it.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { type ChatInput, type ChatService, createChatService } from './chat.service.ts';
