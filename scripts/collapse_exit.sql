-- Where each trial of make claims-cpu leaves the collapse phase: the first validation step from
-- which its val loss stays below 3.2 nats (fortunes' unigram entropy is 3.355), seeds in trial
-- order, and the final val loss (docs/paper.md, "The claims on two cores", quotes it):
--   spheret sql --db runs/claims-cpu/spheret.db "$(cat scripts/collapse_exit.sql)"
SELECT s.name, json_extract(t.config_json,'$.method') AS m, coalesce(json_extract(t.config_json,'$.p'),'') AS p,
 coalesce(json_extract(t.config_json,'$.scalenorm'),'') AS sn, coalesce(json_extract(t.config_json,'$.angle_max'),'') cap,
 group_concat(coalesce((SELECT min(c.step) FROM curves c WHERE c.trial_id=t.trial_id AND c.metric='val/loss' AND c.value < 3.2 AND NOT EXISTS (SELECT 1 FROM curves d WHERE d.trial_id=t.trial_id AND d.metric='val/loss' AND d.step>c.step AND d.value>=3.2)),'never'), ', ') AS left_at,
 group_concat(printf('%.3f',(SELECT value FROM curves c WHERE c.trial_id=t.trial_id AND c.metric='val/loss' AND c.step=500)),', ') AS final
FROM trials t JOIN sweeps s USING(sweep_id) GROUP BY s.name, m, p, sn, cap ORDER BY t.trial_id;
