import { silentLogger, type Logger } from "../../src/log.js";
import type { CallContext } from "../../src/rpc/binding.js";

/**
 * A CallContext as the binding builds one, for a test that calls a handler or a grant itself:
 * `headers` in, the response headers it sets in `sent`, the refusal it notes in `refusedBy`.
 */
export function testCall(
  headers: Record<string, string> = {},
  options: { requestId?: string; log?: Logger } = {},
): CallContext & { sent: Record<string, string>; refusedBy: string[] } {
  const sent: Record<string, string> = {};
  const refusedBy: string[] = [];
  return {
    sent,
    refusedBy,
    requestId: options.requestId ?? "test-request",
    log: options.log ?? silentLogger,
    header: (name) => headers[name],
    setHeader: (name, value) => {
      sent[name] = value;
    },
    noteRefusal: (rule) => {
      refusedBy.push(rule);
    },
  };
}
