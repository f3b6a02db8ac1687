#!/usr/bin/env python3
"""recap_record.py -- re-computes a recorded step's call work (UVMRT_RECORD, written on
cuda) with the capped rule of commit 185bae3, for records made by older binaries:

    recap_record.py IN.json OUT.json [drop-host]

A call with link traffic (its duration_ns below its measured_ns) gets at most its
modelled work times the clean calls' efficiency (measured over modelled of the calls
without link traffic or CPU work: its phase's, else the step's), as the runtime now
computes it (src/exec/step.c, uvmrt__step_work). With drop-host, the calls' host_ns are
left out (the model's CPU time instead). Then: uvmrt-plan --record OUT.json.
"""
import json,sys
src,dst=sys.argv[1],sys.argv[2]; drop_host = len(sys.argv)>3
q=json.load(open(src))
calls=q['calls']
def clean(c): return c.get('duration_source')=='measured' and c['host_bytes']==0 and c.get('measured_ns',0)==c['duration_ns'] and c['modelled_ns']>0
ph={}
for c in calls:
    if clean(c):
        m,d=ph.get(c['phase'],(0,0)); ph[c['phase']]=(m+c['measured_ns'],d+c['modelled_ns'])
ma=sum(v[0] for v in ph.values()); da=sum(v[1] for v in ph.values())
for c in calls:
    if c.get('duration_source')=='measured' and c.get('measured_ns',0)!=c['duration_ns'] and c['host_bytes']==0:
        eff = ph[c['phase']][0]/ph[c['phase']][1] if c['phase'] in ph else (ma/da if da else 0)
        if eff>0 and c['modelled_ns']>0: c['duration_ns']=min(c['duration_ns'], int(c['modelled_ns']*eff))
    if drop_host: c.pop('host_ns',None)
json.dump(q,open(dst,'w'))
