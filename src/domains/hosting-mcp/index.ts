/**
 * The backend's hosting MCP tools (§4.16).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export {
  createHostingMcpService,
  HOSTING_KEY_MIN_LENGTH,
  HOSTING_KEY_PREFIX,
  HOSTING_MCP_LINKS,
  type HostingMcpService,
  VALIDATE_ERRORS,
} from './hosting-mcp.service.ts';
