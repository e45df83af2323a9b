"""Server identity checks of ``engine: vllm-server`` (:mod:`.vllm_server`): is this the server the config asks for?

One server is asked, before any request and again when a replica comes back, for what it
serves (``/v1/models``: the served name and the model it was loaded from), its version
(``/version``), its speculative config where it reports one (``/server_info``, dev mode)
and its speculative-decoding counters (``/metrics``: present or not, and the number of
draft positions). A mismatch is a :class:`~qualgate.errors.DataError` naming the config's
field; a server that cannot be asked is :class:`~qualgate.backends._replicas.Unreachable`.
The replicas must all run one version.
"""

from __future__ import annotations

from typing import Any

from ..errors import DataError
from ._http import TransportError
from ._openai import same_model, spec_mismatch, strict_json
from ._replicas import Unreachable

__all__ = ["ServerIdentity"]

_CHECK_TIMEOUT_S = 30.0  # GETs of /v1/models, /version, /server_info, /metrics


class ServerIdentity:
    """The identity checks of :class:`~qualgate.backends.vllm_server.VLLMServerBackend`.

    A mixin: it reads the backend's ``config``, ``served_model``, ``_k`` (draft tokens),
    ``_client``, ``max_bytes``, ``timeout_s``, ``pool``, ``replicas`` and ``base_urls``, and
    calls its ``_note`` and ``_scrape``.
    """

    def _mismatch(self, url, message, field="model", value=None) -> DataError:
        return DataError(f"the server at {url} {message}", file=self.config.path, field=field, value=value)

    def _get(self, url: str, path: str) -> tuple[int, bytes]:
        r = self._client.request(
            "GET", url, path, None, max_bytes=self.max_bytes, timeout=min(self.timeout_s, _CHECK_TIMEOUT_S)
        )
        return r.status, r.body

    def _get_json(self, url: str, path: str) -> Any:
        """The JSON of a 200 answer; ``None`` for another status or a body that is not JSON."""
        try:
            status, data = self._get(url, path)
            return strict_json(data) if status == 200 else None
        except (TransportError, ValueError):
            return None

    def _open_replicas(self) -> None:
        reachable = self.pool.open()
        if not reachable:
            errors = "; ".join(r.last_error for r in self.replicas)
            raise DataError(
                f"no server can be reached: {errors}",
                file=self.config.path,
                field="engine_options.base_urls",
                value=self.base_urls,
            )
        seen = {r.url: self.pool.servers[r.url]["version"] for r in reachable}
        if len(set(seen.values()) - {None}) > 1:
            raise DataError(
                f"the replicas run different versions: {seen}",
                file=self.config.path,
                field="engine_options.base_urls",
                value=self.base_urls,
            )

    def _check_server(self, url: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Identity of one server (for the manifest) and its /metrics counters; DataError on
        a mismatch, :class:`Unreachable` when it cannot be asked."""
        card = self._served_card(url)
        root = card.get("root")
        server: dict[str, Any] = {
            "model": {"id": card.get("id"), "root": root, "max_model_len": card.get("max_model_len")}
        }
        if root is not None and not same_model(root, self.config.model):
            raise self._mismatch(
                url,
                f"loaded {root!r} as {self.served_model!r}, but the config's model is {self.config.model!r}",
                "model",
                self.config.model,
            )
        version = self._get_json(url, "/version")
        version = version.get("version") if isinstance(version, dict) else None
        server["version"] = version if isinstance(version, str) else None
        if self._check_reported_spec(url):
            server["speculative_config"] = "matches (/server_info)"
        return server, self._check_metrics(url)

    def _served_card(self, url: str) -> dict[str, Any]:
        """The ``/v1/models`` card of the served model (``{}`` when it is not an object)."""
        where = {"file": self.config.path, "field": "engine_options.base_urls", "value": url}
        try:
            status, data = self._get(url, "/v1/models")
        except TransportError as exc:
            raise Unreachable(f"cannot reach {url}/v1/models ({exc.kind}: {exc})") from None
        if status != 200:
            if status >= 500:
                raise Unreachable(f"{url}/v1/models answered HTTP {status}")
            raise DataError(f"{url}/v1/models answered HTTP {status}: {data[:200]!r}", **where)
        try:
            cards = strict_json(data)["data"]
            ids = [c["id"] for c in cards]
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(
                f"{url}/v1/models is not an OpenAI model list ({type(exc).__name__}: {str(exc)[:100]})", **where
            ) from None
        if self.served_model not in ids:
            field = (
                "engine_options.served_model_name" if self.config.engine_options.get("served_model_name") else "model"
            )
            raise self._mismatch(url, f"serves {ids[:10]}, not {self.served_model!r}", field, self.served_model)
        card = cards[ids.index(self.served_model)]
        return card if isinstance(card, dict) else {}

    def _check_reported_spec(self, url: str) -> bool:
        """Compare the served ``speculative_config`` where the server reports it (dev mode)."""
        reported = self._get_json(url, "/server_info?config_format=json")
        vc = reported.get("vllm_config") if isinstance(reported, dict) else None
        if not (isinstance(vc, dict) and "speculative_config" in vc):
            self._note(
                f"{url}: speculative_config not reported (/server_info needs "
                "VLLM_SERVER_DEV_MODE=1); checked through /metrics and responses only"
            )
            return False
        found = spec_mismatch(vc, self.config.model, self.config.speculative)
        if found is not None:
            raise self._mismatch(url, *found)
        return True

    def _check_metrics(self, url: str) -> dict[str, Any] | None:
        """The server's /metrics counters, checked against the config's speculative decoding."""
        before, why = self._scrape(url)
        if before is None:
            self._note(f"{url}: /metrics unavailable ({why})")
            return None
        spec = self.config.speculative
        if not before["vllm"]:
            return before
        if spec is None and before["present"]:
            raise self._mismatch(
                url,
                "runs speculative decoding (its /metrics has "
                "vllm:spec_decode_* counters), but the config is "
                "target-only",
                "speculative",
                None,
            )
        k_server = len(before["num_accepted_tokens_per_pos"])
        if spec is not None and k_server and k_server != self._k:
            raise self._mismatch(
                url,
                f"drafts {k_server} tokens (its /metrics), but the config's num_speculative_tokens is {self._k}",
                "speculative.num_speculative_tokens",
                self._k,
            )
        if spec is not None and not before["present"]:
            self._note(f"{url}: /metrics shows no vllm:spec_decode_* counters; speculative decoding not confirmed")
        return before
