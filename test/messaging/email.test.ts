import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { expect } from "chai";
import { SMTPServer, type SMTPServerOptions } from "smtp-server";
import { createLogger, silentLogger } from "../../src/log.js";
import {
  createEmailProvider,
  DeliveryError,
  HttpEmailProvider,
  LogEmailProvider,
  parseSmtpUrl,
  renderOtpEmail,
  SmtpEmailProvider,
  type OutgoingEmail,
} from "../../src/messaging/email.js";
import { isEmailAddress, isMailbox } from "../../src/net/email-address.js";
import { SUPPORTED_LANGUAGES } from "../../src/messaging/locale.js";

const message: OutgoingEmail = {
  to: "jo@example.com",
  from: "Ringfence <noreply@ringfence.example>",
  subject: "Votre code de connexion",
  body: "Saisissez ce code pour vous connecter :\n\n482913\n\nIl expire dans 10 minutes.",
  reference: "0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11",
};

async function failureOf(p: Promise<unknown>): Promise<DeliveryError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(DeliveryError);
  return err as DeliveryError;
}

interface HttpReceived {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real HTTP receiver on 127.0.0.1 that records each request and answers with `answer`. */
async function startReceiver(answer: (res: ServerResponse) => void) {
  const received: HttpReceived[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({
        method: req.method ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/email`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

interface SmtpReceived {
  mailFrom: string;
  rcptTo: string[];
  user: string | undefined;
  raw: string;
}

/**
 * A real SMTP server (smtp-server) on 127.0.0.1 and a free port, without STARTTLS. Recipients
 * whose local part starts with `reject550` or `defer451` are refused with that reply.
 */
async function startSmtp(options: Partial<SMTPServerOptions> = {}) {
  const received: SmtpReceived[] = [];
  let connections = 0;
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ["STARTTLS"],
    authOptional: true,
    logger: false,
    onConnect(_session, callback) {
      connections++;
      callback();
    },
    onRcptTo(address, _session, callback) {
      if (address.address.startsWith("reject550")) {
        callback(Object.assign(new Error("5.1.1 Mailbox unknown: 482913"), { responseCode: 550 }));
      } else if (address.address.startsWith("defer451")) {
        callback(Object.assign(new Error("4.7.1 Try again later"), { responseCode: 451 }));
      } else {
        callback();
      }
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const { mailFrom, rcptTo } = session.envelope;
        received.push({
          mailFrom: mailFrom === false ? "" : mailFrom.address,
          rcptTo: rcptTo.map((r) => r.address),
          user: typeof session.user === "string" ? session.user : undefined,
          raw: Buffer.concat(chunks).toString("utf8"),
        });
        callback(null, "Message queued as Q1234");
      });
    },
    ...options,
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    port,
    received,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(resolve);
      }),
  };
}

/** A TCP server that accepts connections and never says a word (no SMTP greeting). */
async function startSilentServer() {
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}

interface ParsedEmail {
  headers: Map<string, string>;
  body: string;
}

/** Headers (unfolded, RFC 2047 words decoded, keyed in lower case) and the decoded text body. */
function parseEmail(raw: string): ParsedEmail {
  const split = raw.indexOf("\r\n\r\n");
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, " ");
  const headers = new Map<string, string>();
  for (const line of head.split("\r\n")) {
    const colon = line.indexOf(":");
    headers.set(line.slice(0, colon).toLowerCase(), decodeWords(line.slice(colon + 1).trim()));
  }
  const encoded = raw.slice(split + 4);
  const cte = (headers.get("content-transfer-encoding") ?? "7bit").toLowerCase();
  const body =
    cte === "base64"
      ? Buffer.from(encoded.replace(/\s+/g, ""), "base64").toString("utf8")
      : cte === "quoted-printable"
        ? decodeQuotedPrintable(encoded.replace(/=\r\n/g, ""))
        : encoded;
  // DATA ends with a line break of its own.
  return { headers, body: body.replace(/\r\n/g, "\n").replace(/\n$/, "") };
}

function decodeQuotedPrintable(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const hex = text.slice(i + 1, i + 3);
    if (text[i] === "=" && /^[0-9A-F]{2}$/i.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(text[i] ?? "", "utf8"));
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** RFC 2047 encoded words in UTF-8 (B or Q); the space between two adjacent words is dropped. */
function decodeWords(value: string): string {
  return value
    .replace(/(\?=)\s+(=\?)/g, "$1$2")
    .replace(/=\?utf-8\?([bq])\?([^?]*)\?=/gi, (_, enc: string, text: string) =>
      enc.toLowerCase() === "b"
        ? Buffer.from(text, "base64").toString("utf8")
        : decodeQuotedPrintable(text.replace(/_/g, " ")),
    );
}

describe("email delivery", () => {
  describe("provider choice", () => {
    it("writes the whole email, code included, as one warn line of the log provider", async () => {
      const lines: string[] = [];
      const provider = createEmailProvider(
        { EMAIL_PROVIDER: "log" },
        createLogger("info", (l) => lines.push(l)),
      );
      expect(provider).to.be.instanceOf(LogEmailProvider);
      expect(provider.name).to.equal("log");
      expect(JSON.parse(lines[0]!)).to.include({ level: "warn" });
      expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
      const line = lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === "email (log provider)");
      expect(line).to.deep.include({ level: "warn", ...message });
      expect(lines.every((l) => l.endsWith("\n") && l.split("\n").length === 2)).to.equal(true);
      await provider.close();
    });

    it("builds the HTTP provider from EMAIL_HTTP_URL and the SMTP one from SMTP_URL", async () => {
      const http = createEmailProvider(
        { EMAIL_PROVIDER: "http", EMAIL_HTTP_URL: "https://mail.example/send", EMAIL_HTTP_TIMEOUT_MS: 1_000 },
        silentLogger,
      );
      expect(http).to.be.instanceOf(HttpEmailProvider);
      expect(http.name).to.equal("http");
      const smtp = createEmailProvider(
        { EMAIL_PROVIDER: "smtp", SMTP_URL: "smtps://user:secret@smtp.example" },
        silentLogger,
      );
      expect(smtp).to.be.instanceOf(SmtpEmailProvider);
      expect(smtp.name).to.equal("smtp");
      await smtp.close();
    });

    it("throws a clear error when the chosen provider's URL is missing or wrong, without the password", () => {
      expect(() => createEmailProvider({ EMAIL_PROVIDER: "http" }, silentLogger)).to.throw(
        "EMAIL_HTTP_URL is required when EMAIL_PROVIDER=http",
      );
      expect(() =>
        createEmailProvider({ EMAIL_PROVIDER: "http", EMAIL_HTTP_URL: "ftp://x" }, silentLogger),
      ).to.throw(/EMAIL_HTTP_URL must be an http/);
      expect(() => createEmailProvider({ EMAIL_PROVIDER: "smtp" }, silentLogger)).to.throw(
        "SMTP_URL is required when EMAIL_PROVIDER=smtp",
      );
      expect(() =>
        createEmailProvider({ EMAIL_PROVIDER: "smtp", SMTP_URL: "http://u:hunter2@x" }, silentLogger),
      )
        .to.throw(/SMTP_URL must start with smtp:\/\/ or smtps:\/\//)
        .with.property("message")
        .that.does.not.include("hunter2");
      expect(() =>
        createEmailProvider({ EMAIL_PROVIDER: "smtp", SMTP_URL: "not a url" }, silentLogger),
      ).to.throw(/SMTP_URL must be a URL/);
    });

    it("reads SMTP_URL: STARTTLS on 587 by default, TLS on 465 for smtps, credentials decoded", () => {
      expect(parseSmtpUrl("smtp://relay.internal")).to.deep.equal({
        host: "relay.internal",
        port: 587,
        secure: false,
      });
      expect(parseSmtpUrl("smtps://apikey:p%40ss%3Aw0rd@smtp.example")).to.deep.equal({
        host: "smtp.example",
        port: 465,
        secure: true,
        auth: { user: "apikey", pass: "p@ss:w0rd" },
      });
      expect(parseSmtpUrl("smtp://u:p@[::1]:2525")).to.deep.include({ host: "::1", port: 2525 });
    });
  });

  describe("HTTP provider", () => {
    let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
    afterEach(async () => {
      await receiver?.close();
      receiver = undefined;
    });

    it("POSTs exactly {to, from, subject, body, reference} as JSON, and takes the answer's id", async () => {
      receiver = await startReceiver((res) => {
        res.writeHead(202, { "content-type": "application/json" }).end(JSON.stringify({ id: "em-77" }));
      });
      const provider = new HttpEmailProvider(receiver.url, { timeoutMs: 2_000 });
      expect(await provider.send(message)).to.deep.equal({ providerId: "em-77" });
      expect(receiver.received).to.have.length(1);
      const [req] = receiver.received;
      expect(req!.method).to.equal("POST");
      expect(req!.headers["content-type"]).to.equal("application/json");
      expect(JSON.parse(req!.body)).to.deep.equal({ ...message });
      expect(Object.keys(JSON.parse(req!.body) as object)).to.deep.equal([
        "to",
        "from",
        "subject",
        "body",
        "reference",
      ]);
    });

    it("answers our reference as the provider id when a 2xx answer has no id", async () => {
      receiver = await startReceiver((res) => res.writeHead(204).end());
      const provider = new HttpEmailProvider(receiver.url, { timeoutMs: 2_000 });
      expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
    });

    it("fails with a retryable DeliveryError naming the status, never the body, on a 5xx answer", async () => {
      receiver = await startReceiver((res) => res.writeHead(503).end(`cannot send ${message.body}`));
      const err = await failureOf(new HttpEmailProvider(receiver.url, { timeoutMs: 2_000 }).send(message));
      expect(err.message).to.equal("HTTP email provider answered 503");
      expect(err.retryable).to.equal(true);
    });

    it("marks a 4xx refusal as not worth retrying", async () => {
      receiver = await startReceiver((res) => res.writeHead(422).end());
      const err = await failureOf(new HttpEmailProvider(receiver.url, { timeoutMs: 2_000 }).send(message));
      expect(err.message).to.equal("HTTP email provider answered 422");
      expect(err.retryable).to.equal(false);
    });

    it("fails with a DeliveryError when the provider does not answer within the timeout", async () => {
      receiver = await startReceiver(() => undefined); // never answers
      const started = Date.now();
      const err = await failureOf(new HttpEmailProvider(receiver.url, { timeoutMs: 200 }).send(message));
      expect(err.message).to.equal("HTTP email provider did not answer within 200 ms");
      expect(err.retryable).to.equal(true);
      expect(Date.now() - started).to.be.below(2_000);
    });

    it("fails with a DeliveryError when nothing listens", async () => {
      receiver = await startReceiver((res) => res.end());
      const url = receiver.url;
      await receiver.close();
      receiver = undefined;
      const err = await failureOf(new HttpEmailProvider(url, { timeoutMs: 2_000 }).send(message));
      expect(err.message).to.equal("HTTP email provider unreachable: ECONNREFUSED");
    });

    it("refuses a recipient that is not an email address without posting anything", async () => {
      receiver = await startReceiver((res) => res.end());
      const provider = new HttpEmailProvider(receiver.url, { timeoutMs: 2_000 });
      const err = await failureOf(provider.send({ ...message, to: "jo@example.com\r\nBcc: x@evil.example" }));
      expect(err.retryable).to.equal(false);
      expect(receiver.received).to.have.length(0);
    });
  });

  describe("SMTP provider", () => {
    let smtp: Awaited<ReturnType<typeof startSmtp>> | undefined;
    let provider: SmtpEmailProvider | undefined;
    afterEach(async () => {
      await provider?.close();
      provider = undefined;
      await smtp?.close();
      smtp = undefined;
    });

    it("delivers a text/plain UTF-8 email with the code in its body and a Message-ID from the reference", async () => {
      smtp = await startSmtp();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${smtp.port}`, { timeoutMs: 5_000 });
      const { subject, body } = renderOtpEmail({
        code: "482913",
        locale: "es-ES",
        lifetimeMinutes: 10,
        purpose: "login",
      });
      const sent = await provider.send({ ...message, subject, body });
      expect(sent).to.deep.equal({ providerId: "<0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11@ringfence.example>" });

      expect(smtp.received).to.have.length(1);
      const [mail] = smtp.received;
      expect(mail!.mailFrom).to.equal("noreply@ringfence.example");
      expect(mail!.rcptTo).to.deep.equal(["jo@example.com"]);
      const { headers, body: text } = parseEmail(mail!.raw);
      expect(headers.get("to")).to.equal("jo@example.com");
      expect(headers.get("from")).to.equal("Ringfence <noreply@ringfence.example>");
      // Non-ASCII, so RFC 2047 encoded on the wire.
      expect(mail!.raw).not.to.include("Subject: Tu código");
      expect(headers.get("subject")).to.equal("Tu código de inicio de sesión");
      expect(headers.get("message-id")).to.equal("<0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11@ringfence.example>");
      expect(headers.get("content-type")).to.equal("text/plain; charset=utf-8");
      expect(headers.get("auto-submitted")).to.equal("auto-generated");
      expect(text).to.equal(body);
      expect(text.split("\n")).to.include("482913");
    });

    it("logs in with the user and password of SMTP_URL", async () => {
      smtp = await startSmtp({
        authOptional: false,
        allowInsecureAuth: true,
        onAuth(auth, _session, callback) {
          if (auth.username === "mailer" && auth.password === "s3cr:t@") callback(null, { user: "mailer" });
          else callback(new Error("Invalid username or password"));
        },
      });
      provider = new SmtpEmailProvider(`smtp://mailer:s3cr%3At%40@127.0.0.1:${smtp.port}`, {
        timeoutMs: 5_000,
      });
      await provider.send(message);
      expect(smtp.received.map((m) => m.user)).to.deep.equal(["mailer"]);
    });

    it("fails without retry when the server refuses the credentials", async () => {
      smtp = await startSmtp({
        authOptional: false,
        allowInsecureAuth: true,
        onAuth(_auth, _session, callback) {
          callback(new Error("Invalid username or password"));
        },
      });
      provider = new SmtpEmailProvider(`smtp://mailer:wrong@127.0.0.1:${smtp.port}`, { timeoutMs: 5_000 });
      const err = await failureOf(provider.send(message));
      expect(err.message).to.match(/^SMTP email provider answered 535\b/);
      expect(err.message).not.to.include("wrong");
      expect(err.retryable).to.equal(false);
      expect(smtp.received).to.have.length(0);
    });

    it("reuses a pooled connection for the next message", async () => {
      smtp = await startSmtp();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${smtp.port}`, { timeoutMs: 5_000 });
      await provider.send(message);
      await provider.send({ ...message, reference: "second" });
      expect(smtp.received).to.have.length(2);
      expect(smtp.connections()).to.equal(1);
    });

    it("fails without retry when the server refuses the recipient with 550, and never says the body", async () => {
      smtp = await startSmtp();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${smtp.port}`, { timeoutMs: 5_000 });
      const err = await failureOf(provider.send({ ...message, to: "reject550@example.com" }));
      expect(err.message).to.equal("SMTP email provider answered 550 5.1.1 to RCPT TO");
      expect(err.retryable).to.equal(false);
      expect(err.message).not.to.include("482913");
      expect(smtp.received).to.have.length(0);
    });

    it("marks a 451 refusal as worth retrying", async () => {
      smtp = await startSmtp();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${smtp.port}`, { timeoutMs: 5_000 });
      const err = await failureOf(provider.send({ ...message, to: "defer451@example.com" }));
      expect(err.message).to.equal("SMTP email provider answered 451 4.7.1 to RCPT TO");
      expect(err.retryable).to.equal(true);
      // The pool stays usable.
      await provider.send(message);
      expect(smtp.received).to.have.length(1);
    });

    it("fails with a retryable DeliveryError when the server does not greet within the timeout", async () => {
      const silent = await startSilentServer();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${silent.port}`, { timeoutMs: 300 });
      const started = Date.now();
      try {
        const err = await failureOf(provider.send(message));
        expect(err.message).to.equal("SMTP email provider did not answer within 300 ms");
        expect(err.retryable).to.equal(true);
        expect(Date.now() - started).to.be.below(3_000);
      } finally {
        await provider.close();
        await silent.close();
      }
    });

    it("gives up within the timeout when the server never answers the message data", async () => {
      smtp = await startSmtp({
        onData(stream) {
          stream.resume(); // reads the message and never answers
        },
      });
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${smtp.port}`, { timeoutMs: 300 });
      const started = Date.now();
      const err = await failureOf(provider.send(message));
      expect(err.message).to.equal("SMTP email provider did not answer within 300 ms");
      expect(err.retryable).to.equal(true);
      expect(Date.now() - started).to.be.below(3_000);
    });

    it("fails with a retryable DeliveryError when nothing listens", async () => {
      const silent = await startSilentServer();
      const port = silent.port;
      await silent.close();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${port}`, { timeoutMs: 2_000 });
      const err = await failureOf(provider.send(message));
      expect(err.message).to.equal("SMTP email provider unreachable: ECONNREFUSED");
      expect(err.retryable).to.equal(true);
    });

    it("refuses malformed addresses before talking to the server, and sends nothing once closed", async () => {
      smtp = await startSmtp();
      provider = new SmtpEmailProvider(`smtp://127.0.0.1:${smtp.port}`, { timeoutMs: 5_000 });
      expect((await failureOf(provider.send({ ...message, to: "jo" }))).retryable).to.equal(false);
      expect((await failureOf(provider.send({ ...message, from: "Ringfence" }))).retryable).to.equal(false);
      await provider.close();
      expect((await failureOf(provider.send(message))).message).to.equal("SMTP email provider closed");
      expect(smtp.connections()).to.equal(0);
    });
  });

  describe("OTP email texts", () => {
    const render = (
      locale: string | undefined,
      purpose: "login" | "step_up" = "login",
      lifetimeMinutes = 10,
    ) => renderOtpEmail({ code: "482913", locale, lifetimeMinutes, purpose });

    const subjects: Record<(typeof SUPPORTED_LANGUAGES)[number], [string, string]> = {
      en: ["Your sign-in code", "Your verification code"],
      fr: ["Votre code de connexion", "Votre code de vérification"],
      de: ["Ihr Anmeldecode", "Ihr Bestätigungscode"],
      es: ["Tu código de inicio de sesión", "Tu código de verificación"],
      it: ["Il tuo codice di accesso", "Il tuo codice di verifica"],
      pt: ["Seu código de acesso", "Seu código de verificação"],
    };
    const lifetimes: Record<(typeof SUPPORTED_LANGUAGES)[number], [string, string]> = {
      en: ["It expires in 10 minutes.", "It expires in 1 minute."],
      fr: ["Il expire dans 10 minutes.", "Il expire dans 1 minute."],
      de: ["Er ist 10 Minuten gültig.", "Er ist 1 Minute gültig."],
      es: ["Expira en 10 minutos.", "Expira en 1 minuto."],
      it: ["Scade tra 10 minuti.", "Scade tra 1 minuto."],
      pt: ["Ele expira em 10 minutos.", "Ele expira em 1 minuto."],
    };

    for (const language of SUPPORTED_LANGUAGES) {
      it(`writes ${language}: the code alone on its line as digits, never in the subject, the lifetime in words`, () => {
        for (const [purpose, subject] of [
          ["login", subjects[language][0]],
          ["step_up", subjects[language][1]],
        ] as const) {
          const email = render(language, purpose);
          expect(email.locale).to.equal(language);
          expect(email.subject).to.equal(subject);
          expect(email.subject).not.to.match(/\d/);
          const lines = email.body.split("\n");
          expect(lines.filter((l) => /\d{6}/.test(l))).to.deep.equal(["482913"]);
          expect(lines).to.include(lifetimes[language][0]);
          expect(render(language, purpose, 1).body.split("\n")).to.include(lifetimes[language][1]);
        }
        expect(render(language, "login").body).not.to.equal(render(language, "step_up").body);
      });
    }

    it("lays the body out as intro, code, lifetime and warning", () => {
      expect(render("en-GB")).to.deep.equal({
        subject: "Your sign-in code",
        body: [
          "Enter this code to sign in:",
          "",
          "482913",
          "",
          "It expires in 10 minutes.",
          "",
          "If you did not try to sign in, you can ignore this email. Never share this code with anyone.",
        ].join("\n"),
        locale: "en-GB",
      });
    });

    it("normalizes the locale, writes European Portuguese outside Brazil, and falls back to en-US", () => {
      expect(render("fr-ca").locale).to.equal("fr-CA");
      expect(render("pt-BR").subject).to.equal("Seu código de acesso");
      expect(render("pt-PT")).to.deep.include({ subject: "O seu código de acesso", locale: "pt-PT" });
      expect(render("pt-AO").body).to.match(/^Introduza este código/);
      for (const locale of ["ja-JP", "nl", "", undefined, "en_US!"]) {
        expect(render(locale)).to.deep.include({ subject: "Your sign-in code", locale: "en-US" });
      }
    });

    it("refuses a code that is not digits and a lifetime under a minute", () => {
      expect(() => renderOtpEmail({ code: "12ab", lifetimeMinutes: 5, purpose: "login" })).to.throw(/digits/);
      expect(() => renderOtpEmail({ code: "1234", lifetimeMinutes: 0, purpose: "login" })).to.throw(
        /lifetimeMinutes/,
      );
    });
  });

  describe("email addresses", () => {
    const valid = [
      "jo@example.com",
      "first.last+tag@sub.example.co.uk",
      "o'brien@example.ie",
      "x@a.io",
      "user_name-1@example-domain.org",
      "jo@bücher.example",
      `${"a".repeat(64)}@example.com`,
      `a@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}.${"e".repeat(60)}`,
    ];
    const invalid = [
      "",
      "jo",
      "@example.com",
      "jo@",
      "jo@localhost",
      "jo@@example.com",
      "jo@bar@example.com",
      "jo smith@example.com",
      "jo@example .com",
      "jo@example.com ",
      "jo@example.com\r\nBcc: x@evil.example",
      "jo\u0000@example.com",
      ".jo@example.com",
      "jo.@example.com",
      "j..o@example.com",
      '"jo"@example.com',
      "jo@[127.0.0.1]",
      "jo@127.0.0.1",
      "jo@-example.com",
      "jo@example-.com",
      "jo@example..com",
      "jo@example.com.",
      "<jo@example.com>",
      `${"a".repeat(65)}@example.com`,
      `a@${"b".repeat(64)}.com`,
      `a@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}.${"e".repeat(61)}`,
    ];
    for (const v of valid) {
      it(`accepts ${JSON.stringify(v.length > 40 ? `${v.slice(0, 37)}...` : v)} (${v.length} characters)`, () => {
        expect(isEmailAddress(v)).to.equal(true);
      });
    }
    for (const v of invalid) {
      it(`refuses ${JSON.stringify(v.length > 40 ? `${v.slice(0, 37)}...` : v)} (${v.length} characters)`, () => {
        expect(isEmailAddress(v)).to.equal(false);
      });
    }

    it("accepts a sender as a bare address or with a display name", () => {
      expect(isMailbox("noreply@ringfence.example")).to.equal(true);
      expect(isMailbox("Ringfence <noreply@ringfence.example>")).to.equal(true);
      expect(isMailbox("Ringfence")).to.equal(false);
      expect(isMailbox("Ring<fence <noreply@ringfence.example>")).to.equal(false);
      expect(isMailbox("Ringfence\r\nBcc: x@evil.example <noreply@ringfence.example>")).to.equal(false);
    });
  });
});
