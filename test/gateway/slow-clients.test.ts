import type { Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { expect } from "chai";
import { fromJson, type Message } from "@bufbuild/protobuf";
import { createGateway } from "../../src/gateway/gateway.js";
import { silentLogger } from "../../src/log.js";
import type { Contract } from "../../src/rpc/contract.js";
import { bindService, type UnaryHandler } from "../../src/rpc/binding.js";
import { outcomeOf, type CallRecord } from "../../src/observability/calls.js";
import { buildFixtureContract, messageType, serviceDefinition, serviceType } from "../support/gateway.js";

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 2_000;
/** How late a timeout may fire: the gateway promises within a second of its setting. */
const SLACK_MS = 1_000;
const MAX_BODY = 65_536;
/** What a refused body may still have been read past the limit: one socket read. */
const READ_AHEAD = 65_536;

/** What the client of one raw connection saw: every byte answered, and when the socket closed. */
interface Seen {
  text: string;
  closedAfterMs: number;
}

/**
 * The gateway's slow-client timeouts and its refusals of bodies it will not read, over raw TCP
 * sockets: what node:http enforces only when its connection check runs, and what a client that
 * keeps sending after a refusal could make the gateway read.
 */
describe("built-in REST gateway: slow clients and refused bodies", function () {
  this.timeout(20_000);
  let contract: Contract;
  let server: Server;
  let port: number;
  let handled = 0;
  const records: CallRecord[] = [];
  /** The gateway's side of each connection, in the order they were accepted. */
  const accepted: Socket[] = [];

  before(async function () {
    this.timeout(60_000);
    contract = buildFixtureContract();
    const service = serviceType(contract, "SessionEchoService");
    const echo = messageType(contract, "Echo");
    const fail: UnaryHandler<Message, Message> = () => {
      handled += 1;
      return Promise.resolve(fromJson(echo, { method: "Fail" }));
    };
    const binding = bindService(serviceDefinition(service), { fail }, { dialect: "session" });
    server = createGateway([binding], {
      log: silentLogger,
      docsUrl: "https://docs.example.test",
      maxBodyBytes: MAX_BODY,
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      contract,
      ready: () => Promise.resolve(true),
      observe: (r) => records.push(r),
    });
    server.on("connection", (socket: Socket) => accepted.push(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async function () {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(function () {
    handled = 0;
    records.length = 0;
  });

  /**
   * Opens a connection, lets `drive` write to it, and resolves once the gateway closed it. Write
   * errors after the gateway closed (EPIPE, ECONNRESET) are the expected end, not a failure.
   */
  function session(drive: (socket: Socket) => void): Promise<Seen> {
    const started = Date.now();
    return new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.setNoDelay(true);
      const chunks: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      socket.on("error", () => undefined);
      socket.on("close", () => {
        resolve({ text: Buffer.concat(chunks).toString("latin1"), closedAfterMs: Date.now() - started });
      });
      socket.on("connect", () => {
        drive(socket);
      });
    });
  }

  /** Writes `chunk` again and again, as fast as the connection takes it, until it closes. */
  function flood(socket: Socket, chunk: Buffer): void {
    const more = () => {
      while (!socket.destroyed && socket.writable && socket.write(chunk));
    };
    socket.on("drain", more);
    more();
  }

  /** The gateway's side of the latest connection, once it is closed. */
  async function serverSide(): Promise<Socket> {
    const socket = accepted.at(-1);
    if (socket === undefined) throw new Error("no connection was accepted");
    if (!socket.closed) await new Promise((resolve) => socket.once("close", resolve));
    return socket;
  }

  describe("timeouts (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS)", function () {
    it("cuts a connection that sends nothing within a second of the header timeout", async function () {
      const seen = await session(() => undefined);
      expect(seen.closedAfterMs).to.be.at.least(HEADERS_TIMEOUT_MS);
      expect(seen.closedAfterMs).to.be.below(HEADERS_TIMEOUT_MS + SLACK_MS);
    });

    it("cuts headers trickled a byte at a time within a second of the header timeout, with 408", async function () {
      const seen = await session((socket) => {
        socket.write("POST /v1/session/echo/fail/x HTTP/1.1\r\nHost: gateway\r\nX-Slow: ");
        const timer = setInterval(() => {
          socket.write("a");
        }, 100);
        socket.on("close", () => {
          clearInterval(timer);
        });
      });
      expect(seen.closedAfterMs).to.be.at.least(HEADERS_TIMEOUT_MS);
      expect(seen.closedAfterMs).to.be.below(HEADERS_TIMEOUT_MS + SLACK_MS);
      expect(seen.text).to.match(/^HTTP\/1\.1 408 /);
      expect(handled).to.equal(0);
    });

    it("cuts a body that stalls within a second of the request timeout, with 408", async function () {
      const seen = await session((socket) => {
        socket.write(
          "POST /v1/session/echo/fail/x HTTP/1.1\r\nHost: gateway\r\n" +
            "Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{}",
        );
      });
      expect(seen.closedAfterMs).to.be.at.least(REQUEST_TIMEOUT_MS);
      expect(seen.closedAfterMs).to.be.below(REQUEST_TIMEOUT_MS + SLACK_MS);
      expect(seen.text).to.match(/^HTTP\/1\.1 408 /);
      expect(handled).to.equal(0);
    });
  });

  describe("refused bodies are not read", function () {
    it("answers a declared body over the limit with 413 and Connection: close, and reads no further", async function () {
      const head =
        "POST /v1/session/echo/fail/x HTTP/1.1\r\nHost: gateway\r\n" +
        "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n";
      const seen = await session((socket) => {
        socket.write(head);
        flood(socket, Buffer.alloc(65_536, "x"));
      });
      expect(seen.text).to.match(/^HTTP\/1\.1 413 /);
      expect(seen.text.toLowerCase()).to.include("\r\nconnection: close\r\n");
      const side = await serverSide();
      expect(side.bytesRead).to.be.at.most(head.length + MAX_BODY + READ_AHEAD);
      expect(handled).to.equal(0);
    });

    it("stops reading a chunked body as soon as it passes the limit, with 413 and Connection: close", async function () {
      const head =
        "POST /v1/session/echo/fail/x HTTP/1.1\r\nHost: gateway\r\n" +
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
      const piece = Buffer.alloc(16_384, "x");
      const chunk = Buffer.concat([
        Buffer.from(`${piece.length.toString(16)}\r\n`),
        piece,
        Buffer.from("\r\n"),
      ]);
      const seen = await session((socket) => {
        socket.write(head);
        flood(socket, chunk);
      });
      expect(seen.text).to.match(/^HTTP\/1\.1 413 /);
      expect(seen.text.toLowerCase()).to.include("\r\nconnection: close\r\n");
      const side = await serverSide();
      expect(side.bytesRead).to.be.at.most(head.length + MAX_BODY + READ_AHEAD);
      expect(handled).to.equal(0);
    });

    it("answers headers over node's limit with 431 and Connection: close, and reads no further", async function () {
      const head = "GET /healthz HTTP/1.1\r\nHost: gateway\r\nX-Big: ";
      const seen = await session((socket) => {
        socket.write(head);
        flood(socket, Buffer.alloc(16_384, "a"));
      });
      expect(seen.text).to.match(/^HTTP\/1\.1 431 /);
      expect(seen.text.toLowerCase()).to.include("\r\nconnection: close\r\n");
      const side = await serverSide();
      // node:http's header limit (16 KB), and at most one read past it.
      expect(side.bytesRead).to.be.at.most(16_384 + READ_AHEAD);
    });

    it("keeps the connection of a refusal whose body was read whole", async function () {
      const body = "not json";
      const seen = await session((socket) => {
        socket.write(
          "POST /v1/session/echo/fail/x HTTP/1.1\r\nHost: gateway\r\n" +
            `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
            "GET /healthz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n",
        );
      });
      expect(seen.text).to.match(/^HTTP\/1\.1 400 /);
      expect(seen.text).to.match(/\r\n\r\n[^]*HTTP\/1\.1 200 /);
    });
  });

  describe("a deadline already past on arrival", function () {
    it("is refused with 504 before the handler runs, and recorded as the caller's error", async function () {
      const res = await fetch(`http://127.0.0.1:${port}/v1/session/echo/fail/x`, {
        method: "POST",
        headers: { "content-type": "application/json", "grpc-timeout": "0S" },
        body: "{}",
      });
      expect(res.status).to.equal(504);
      expect(await res.json()).to.deep.equal({
        code: "deadline_exceeded",
        message: "the call's deadline passed before the call started",
      });
      expect(handled).to.equal(0);
      expect(records).to.have.length(1);
      expect(records[0]).to.include({ code: "deadline_exceeded", deadlineExpiredOnArrival: true });
      expect(outcomeOf(records[0] as CallRecord)).to.equal("client_error");
    });

    it("runs the handler for a deadline still ahead", async function () {
      const res = await fetch(`http://127.0.0.1:${port}/v1/session/echo/fail/x`, {
        method: "POST",
        headers: { "content-type": "application/json", "grpc-timeout": "5S" },
        body: "{}",
      });
      expect(res.status).to.equal(200);
      expect(handled).to.equal(1);
    });
  });
});
