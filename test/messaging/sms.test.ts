import { expect } from "chai";
import { createLogger, silentLogger } from "../../src/log.js";
import {
  createSmsProvider,
  HttpSmsProvider,
  LogSmsProvider,
  SmppSmsProvider,
} from "../../src/messaging/sms.js";
import { FakeSmsc } from "../support/fake-smsc.js";

describe("SMS provider choice", () => {
  it("writes the whole message, code included, as one warn line of the log provider", async () => {
    const lines: string[] = [];
    const provider = createSmsProvider(
      { SMS_PROVIDER: "log" },
      createLogger("info", (l) => lines.push(l)),
    );
    expect(provider).to.be.instanceOf(LogSmsProvider);
    const sent = await provider.send({
      to: "+33612345678",
      from: "Ringfence",
      body: "Your verification code is 482913.",
      locale: "en-US",
      reference: "ref-9",
    });
    expect(sent).to.deep.equal({ providerId: "ref-9" });
    const line = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === "sms (log provider)");
    expect(line).to.deep.include({
      level: "warn",
      to: "+33612345678",
      from: "Ringfence",
      body: "Your verification code is 482913.",
      locale: "en-US",
      reference: "ref-9",
    });
    expect(lines.every((l) => l.endsWith("\n") && l.split("\n").length === 2)).to.equal(true);
    await provider.close();
  });

  it("warns when the log provider is created", () => {
    const lines: string[] = [];
    createSmsProvider(
      { SMS_PROVIDER: "log" },
      createLogger("info", (l) => lines.push(l)),
    );
    expect(lines).to.have.length(1);
    expect(JSON.parse(lines[0]!)).to.include({ level: "warn" });
  });

  it("builds the HTTP provider from SMS_HTTP_URL", () => {
    const provider = createSmsProvider(
      { SMS_PROVIDER: "http", SMS_HTTP_URL: "https://sms.example/send", SMS_HTTP_TIMEOUT_MS: 1_000 },
      silentLogger,
    );
    expect(provider).to.be.instanceOf(HttpSmsProvider);
    expect(provider.name).to.equal("http");
  });

  it("builds the SMPP provider from SMPP_URL", async () => {
    const smsc = await FakeSmsc.start();
    const provider = createSmsProvider({ SMS_PROVIDER: "smpp", SMPP_URL: smsc.url() }, silentLogger);
    expect(provider).to.be.instanceOf(SmppSmsProvider);
    await provider.close();
    await smsc.close();
  });

  it("throws a clear error when the chosen provider's URL is missing", () => {
    expect(() => createSmsProvider({ SMS_PROVIDER: "http" }, silentLogger)).to.throw(
      "SMS_HTTP_URL is required when SMS_PROVIDER=http",
    );
    expect(() => createSmsProvider({ SMS_PROVIDER: "smpp" }, silentLogger)).to.throw(
      "SMPP_URL is required when SMS_PROVIDER=smpp",
    );
    expect(() => createSmsProvider({ SMS_PROVIDER: "http", SMS_HTTP_URL: "ftp://x" }, silentLogger)).to.throw(
      /SMS_HTTP_URL must be an http/,
    );
  });
});
