# call F (session 33): does a trap in one process sharing the GPU (time-slicing, as MK_SHARE_GPUS=1) reach its host
# while another process whose kernel trapped earlier keeps its context? tools/wip/trap_share_probe.cu, built here
# into .carry/trap_share_probe. Carries .carry/trap_share_probe.
source tools/gpu_env.sh
P=.carry/trap_share_probe
echo "## 1. B alone: traps at 4 s"
timeout 40 $P B 4000 0
echo "## 2. A traps at 2 s and holds its context 20 s; B starts 0.5 s later and traps at 4 s"
timeout 40 $P A 2000 20000 & sleep 0.5; timeout 40 $P B 4000 0; wait
echo "## 3. as 2 with CUDA_DEVICE_MAX_CONNECTIONS=1"
export CUDA_DEVICE_MAX_CONNECTIONS=1
timeout 40 $P A 2000 20000 & sleep 0.5; timeout 40 $P B 4000 0; wait
echo "## 4. B traps at 2 s, A at 4 s and holds 15 s (which one traps first does not matter?)"
timeout 40 $P A 4000 15000 & sleep 0.5; timeout 40 $P B 1500 0; wait
