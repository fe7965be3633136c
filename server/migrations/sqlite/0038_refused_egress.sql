-- Refused egress is the agent's egress, not an application error (`sandbox::events`).
--
-- roost recorded its egress proxy's refusals (a destination the operator's rules refuse,
-- or one that could not be resolved or reached) as error spans, so a runtime that only
-- tried the internet at boot (Hermes: GitHub and OpenRouter) showed as erroring in health
-- and counted in `error_rate` alerts. New records carry no error status; this gives the
-- stored ones the same and takes them out of the error counts made from them. They are
-- roost's own spans: scope `roost.model_gateway`, a root client span named
-- `egress host:port`. Their refusal stays in their attributes (`roost.egress.refused`).
CREATE TEMPORARY TABLE refused_egress AS
SELECT id, trace_id, service, session_id, strftime('%Y-%m-%d', start_ns / 1000000000, 'unixepoch') AS day
  FROM spans
 WHERE status_code = 2 AND scope = 'roost.model_gateway' AND kind = 3 AND parent_span_id = ''
   AND name LIKE 'egress %';

UPDATE services SET errors = MAX(errors - (SELECT COUNT(*) FROM refused_egress r WHERE r.service = services.service), 0)
 WHERE service IN (SELECT service FROM refused_egress);
UPDATE sessions SET errors = MAX(errors - (SELECT COUNT(*) FROM refused_egress r WHERE r.session_id = sessions.session_id), 0)
 WHERE session_id IN (SELECT session_id FROM refused_egress);
UPDATE traces SET errors = MAX(errors - (SELECT COUNT(*) FROM refused_egress r WHERE r.trace_id = traces.trace_id), 0)
 WHERE trace_id IN (SELECT trace_id FROM refused_egress);
UPDATE activity_daily SET span_errors = MAX(span_errors - (SELECT COUNT(*) FROM refused_egress r WHERE r.day = activity_daily.day), 0)
 WHERE day IN (SELECT day FROM refused_egress);
UPDATE spans SET status_code = 0, status_message = '' WHERE id IN (SELECT id FROM refused_egress);

DROP TABLE refused_egress;
