import type { Logger } from "../log.js";
import { outcomeOf, type CallObserver } from "./calls.js";

/**
 * The request log: one `info` line per answered call, on either transport, with its method,
 * transport, code, outcome, statuses, duration, request id, caller and the rule that refused it, if one
 * did. LOG_LEVEL=warn leaves it out.
 */
export function requestLog(log: Logger): CallObserver {
  // The fields are names, codes, numbers and ids: no redaction walk for a line written per call.
  const write = (msg: string, fields: Record<string, unknown>) => {
    if (log.infoPlain === undefined) log.info(msg, fields);
    else log.infoPlain(msg, fields);
  };
  return (r) => {
    write("call", {
      method: `${r.service}/${r.method}`,
      transport: r.transport,
      code: r.code,
      outcome: outcomeOf(r),
      grpc_status: r.grpcStatus,
      http_status: r.httpStatus,
      duration_ms: Math.round(r.durationMs * 1000) / 1000,
      request_id: r.requestId,
      ...(r.caller === undefined ? {} : { caller: r.caller }),
      ...(r.refusedBy === undefined ? {} : { refused_by: r.refusedBy }),
    });
  };
}
