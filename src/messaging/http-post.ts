import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { z } from "zod";
import { DeliveryError } from "./provider.js";

/** The optional part of an HTTP SMS provider's answer that we use: its own id of the message. */
const Answer = z.object({ id: z.string().min(1).max(256) });

/** An answer's body is read up to this many bytes; a longer one only loses the provider's id. */
const ANSWER_BYTES_MAX = 64 * 1024;

/**
 * Connections to providers are kept open between messages, one pool per protocol: a send reuses a
 * warm connection (no TCP or TLS handshake) instead of opening its own. One idle for 4 s is closed
 * by us, before a server's own idle limit (5 s is common, Node's default) can close it under a
 * message just written to it, which would leave that message's outcome unknown.
 */
const IDLE_MS = 4_000;
const agents = {
  "http:": new HttpAgent({ keepAlive: true, timeout: IDLE_MS }),
  "https:": new HttpsAgent({ keepAlive: true, timeout: IDLE_MS }),
};

/** Errors that say the request never reached the provider: a refusal for sure. */
const NEVER_SENT = /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)$/;

/**
 * POSTs a message as JSON to an HTTP provider (docs/decisions.md#8-message-delivery-providers): any
 * 2xx means accepted and gives the provider's `id` when its answer has one. Failures are
 * DeliveryErrors whose message names the status or network error, never the message. Redirects are
 * not followed, so a message holding a code cannot be forwarded to another host; like a dropped
 * connection or no answer within `timeoutMs`, one leaves the outcome unknown.
 */
export async function postToProvider(
  label: string,
  url: string,
  payload: Record<string, string>,
  timeoutMs: number,
): Promise<string | undefined> {
  const { status, body } = await postJson(label, url, payload, timeoutMs);
  if (status < 200 || status > 299) throw refusal(label, status);
  return idOf(body);
}

/** What a provider answered: its status, and its body when it was read whole. */
export interface ProviderAnswer {
  status: number;
  /** Undefined when it was not read (a refusal's, unless asked), longer than 64 KiB, or cut short. */
  body: Buffer | undefined;
}

export interface PostOptions {
  /** Request headers besides content-type, accept and content-length (an `authorization`). */
  headers?: Readonly<Record<string, string>>;
  /** Whether a non-2xx answer's body is read too (it may say why); else it is left unread. */
  readRefusals?: boolean;
}

/**
 * POSTs `payload` as JSON and answers the provider's status and body. Only what leaves no answer
 * to judge rejects, with a DeliveryError: the network (unreachable, the connection dropped), no
 * answer within `timeoutMs` (its deadline covers the answer's body too) and a redirect, which is
 * not followed. Once a 2xx has come, the message is accepted: a later failure only loses its body.
 */
export function postJson(
  label: string,
  url: string,
  payload: unknown,
  timeoutMs: number,
  options: PostOptions = {},
): Promise<ProviderAnswer> {
  const target = new URL(url);
  const agent = target.protocol === "https:" ? agents["https:"] : agents["http:"];
  const request = target.protocol === "https:" ? httpsRequest : httpRequest;
  const body = Buffer.from(JSON.stringify(payload));
  return new Promise<ProviderAnswer>((resolve, reject) => {
    let answered = false;
    const req = request(target, {
      method: "POST",
      agent,
      headers: {
        ...options.headers,
        "content-type": "application/json",
        accept: "application/json",
        "content-length": body.length,
      },
    });
    const timer = setTimeout(() => {
      req.destroy(new DeadlineError());
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
    };
    req.on("error", (err) => {
      done();
      if (answered) return;
      reject(failure(label, timeoutMs, err));
    });
    req.on("response", (res) => {
      answered = true;
      const status = res.statusCode ?? 0;
      if (status >= 300 && status <= 399) {
        done();
        res.resume();
        // Not followed: what the provider made of the message is not known.
        reject(
          new DeliveryError(`${label} answered a redirect (${status}), not followed`, true, {
            outcomeUnknown: true,
          }),
        );
        return;
      }
      const accepted = status >= 200 && status <= 299;
      if (!accepted && options.readRefusals !== true) {
        done();
        res.resume();
        resolve({ status, body: undefined });
        return;
      }
      readAnswer(res).then(
        (read) => {
          done();
          resolve({ status, body: read });
        },
        () => {
          done();
          resolve({ status, body: undefined });
        },
      );
    });
    req.end(body);
  });
}

/** The provider's id in a 2xx answer's body, if it holds one. */
function idOf(body: Buffer | undefined): string | undefined {
  if (body === undefined) return undefined;
  try {
    const parsed = Answer.safeParse(JSON.parse(body.toString("utf8")));
    return parsed.success ? parsed.data.id : undefined;
  } catch {
    return undefined;
  }
}

/** An answer's body, or undefined when it is longer than ANSWER_BYTES_MAX or cut short. */
function readAnswer(res: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > ANSWER_BYTES_MAX) {
        res.destroy();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    res.on("error", reject);
    res.on("aborted", () => {
      resolve(undefined);
    });
    res.on("end", () => {
      resolve(Buffer.concat(chunks));
    });
  });
}

/** A non-2xx answer. 4xx says the message itself was refused; 408, 429 and 5xx may pass later. */
function refusal(label: string, status: number): DeliveryError {
  const retryable = status >= 500 || status === 408 || status === 429;
  return new DeliveryError(`${label} answered ${status}`, retryable);
}

class DeadlineError extends Error {
  override readonly name = "DeadlineError";
}

function failure(label: string, timeoutMs: number, err: Error): DeliveryError {
  if (err instanceof DeadlineError) {
    return new DeliveryError(`${label} did not answer within ${timeoutMs} ms`, true, {
      outcomeUnknown: true,
    });
  }
  const code = "code" in err && typeof err.code === "string" ? err.code : "network error";
  // Refused or unresolved: nothing reached the provider. Anything else may have, after the request.
  return new DeliveryError(`${label} unreachable: ${code}`, true, { outcomeUnknown: !NEVER_SENT.test(code) });
}
